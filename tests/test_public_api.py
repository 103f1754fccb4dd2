"""The public face: typed operation handles, names, version, the sync client's
methods, and a user's fully typed script running against the simulator."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import pickle
import re
import tomllib
import traceback
from pathlib import Path
from types import ModuleType

import pytest

import verif_client as vc
from verif_client.simulator import Simulator, serve_in_thread

ROOT = Path(__file__).resolve().parent.parent


def load_user_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "user_script", ROOT / "tests" / "typing" / "user_script.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_typed_user_script_runs_against_the_simulator() -> None:
    script = load_user_script()
    with serve_in_thread(Simulator()) as server:
        async_seen, sync_seen = script.main(server.base_url)
    assert vc.PollStatus.VERIFIED in sync_seen
    assert any(isinstance(item, tuple) and vc.PollStatus.LOCATED in item for item in async_seen)
    body = (
        b'<?xml version="1.0" encoding="utf-8"?>\r\n<SecureLinkCodeVerificationResult '
        b'xmlns="http://api.giact.com/verificationservices/v5"><Verified>true</Verified>'
        b"</SecureLinkCodeVerificationResult>"
    )
    assert script.codec_user(body) is True


def test_each_operation_is_a_public_constant_named_after_its_method() -> None:
    for op in vc.OPERATIONS:
        assert getattr(vc, op.method.upper()) is op
        assert op.method.upper() in vc.__all__
        assert callable(getattr(vc.VerificationClient, op.method))


def test_an_operation_handle_and_its_wire_name_decode_alike() -> None:
    codec = vc.codec_for(vc.Binding.HTTP_GET)
    body = (
        b'<?xml version="1.0" encoding="utf-8"?>\r\n'
        b'<string xmlns="http://api.giact.com/verificationservices/v5">hi</string>'
    )
    by_handle = codec.decode(vc.GET_MOBILE_CONSENT_TEXT, 200, (), body)
    by_name = codec.decode("GetMobileConsentText", 200, (), body)
    assert by_handle == by_name == "hi"


def test_public_names_show_as_verif_client_dot_name() -> None:
    for name in vc.__all__:
        value = getattr(vc, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ == "verif_client", name
    assert repr(vc.SoapFault) == "<class 'verif_client.SoapFault'>"
    try:
        raise vc.HTTPStatusError(503, "Service Unavailable")
    except vc.HTTPStatusError:
        printed = traceback.format_exc()
    assert "verif_client.HTTPStatusError: HTTP 503: Service Unavailable" in printed
    assert "_errors" not in printed.splitlines()[-1]


@pytest.mark.parametrize("module_name", ["verif_client.bulk", "verif_client.simulator"])
def test_the_public_modules_names_show_under_their_module_too(module_name: str) -> None:
    module = importlib.import_module(module_name)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ == module_name, name


def test_every_error_the_package_exports_is_a_verif_client_error() -> None:
    import verif_client.bulk as bulk

    # SendError is the one a Transport of the user's raises *to* the client, which
    # turns it into a TransportError: no caller ever catches it.
    raised_to_us = {"SendError"}
    for module in (vc, bulk):
        for name in set(module.__all__) - raised_to_us:
            value = getattr(module, name)
            if inspect.isclass(value) and issubclass(value, Exception):
                assert issubclass(value, vc.VerifClientError), name
    assert repr(bulk.JournalBusyError) == "<class 'verif_client.bulk.JournalBusyError'>"
    again = pickle.loads(pickle.dumps(bulk.JournalBusyError("job.sqlite: in use")))
    assert type(again) is bulk.JournalBusyError


def test_errors_still_pickle_under_their_public_names() -> None:
    error = vc.DecodeError("bad", element="Verified", status_code=200)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is vc.DecodeError


def test_version_is_the_installed_one_and_the_one_pyproject_reads() -> None:
    assert vc.__version__ == importlib.metadata.version("verif-client")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "verif_client/__init__.py"


def public_methods(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))}


def test_the_sync_client_has_every_method_of_the_async_one() -> None:
    async_only = {"aclose"}  # the sync client's is close()
    assert public_methods(vc.VerificationClient) - async_only <= public_methods(
        vc.SyncVerificationClient
    )
    assert "close" in public_methods(vc.SyncVerificationClient)


def test_the_sync_poll_iterator_stops_its_run_when_left_early() -> None:
    simulator = Simulator()
    policy = vc.PollPolicy(initial_delay=0, multiplier=1, max_delay=0, jitter=0, timeout=30)
    with (
        serve_in_thread(simulator) as server,
        vc.SyncVerificationClient(server.base_url, username="u", password="p") as client,
    ):
        ids = [client.send_confirmation_sms(f"555000{i:04d}", "Pay?").request_id for i in range(5)]
        outcomes = client.poll_verifications(ids, policy=policy, max_concurrency=1)
        first = next(outcomes)
        outcomes.close()
        # The run is over: the client still serves calls, and the loop is free.
        assert client.has_been_verified(first.request_id).verified is True
        assert sorted(o.request_id for o in client.poll_verifications(ids, policy=policy)) == ids


@pytest.mark.parametrize(
    ("policy", "arguments", "message"),
    [
        (vc.RetryPolicy, {"attempts": 0}, "'attempts' must be >= 1: 0"),
        (vc.RetryPolicy, {"deadline": -1.0}, "'deadline' must be >= 0.0: -1.0"),
        (vc.PollPolicy, {"jitter": 1.5}, "'jitter' must be <= 1.0: 1.5"),
        (vc.PollPolicy, {"timeout": float("nan")}, "'timeout' must be >= 0.0: nan"),
    ],
)
def test_policies_refuse_bad_values_naming_the_field(
    policy: type, arguments: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        policy(**arguments)


def test_max_concurrency_below_one_is_refused_at_once() -> None:
    client = vc.VerificationClient("http://unused")
    with pytest.raises(ValueError, match="max_concurrency must be >= 1"):
        client.poll_verifications([1], max_concurrency=0)
