"""The simulator's settings for the real stack's edges, seen through the client:
the Verified dialect, an operation that throws, a CR in a string."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from _sim_helpers import EP, VERIFIED

import verif_client as vc
from verif_client.simulator import Simulator, SimulatorConfig, serve

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def connected(
    simulator: Simulator, where: str, **options: Any
) -> AsyncIterator[vc.VerificationClient]:
    options = {"username": "tester", "password": "tester-password", **options}
    if where == "in-process":
        transport = httpx.ASGITransport(app=simulator)
        async with vc.VerificationClient("http://sim", transport=transport, **options) as client:
            yield client
    else:
        async with (
            serve(simulator) as server,
            vc.VerificationClient(server.base_url, **options) as client,
        ):
            yield client


WHERE = pytest.mark.parametrize("where", ["in-process", "loopback"])
BINDINGS = pytest.mark.parametrize("binding", list(vc.Binding))


@WHERE
@BINDINGS
async def test_the_bool_dialect_says_false_while_pending_and_for_unknown_ids(
    where: str, binding: vc.Binding
) -> None:
    simulator = Simulator(config=SimulatorConfig(verified_dialect="bool"))
    async with connected(simulator, where, binding=binding) as client:
        sent = await client.send_confirmation_sms("5551234567", "Did you ask?")
        pending = await client.has_been_verified(sent.request_id)
        unknown = await client.has_been_verified(12345)
        simulator.verify(sent.request_id)
        verified = await client.has_been_verified(sent.request_id)
    assert pending == vc.VerificationResult(verified=False)
    assert unknown == vc.VerificationResult(False, "Invalid SecureLink RequestID")
    assert verified == vc.VerificationResult(verified=True)


@WHERE
@BINDINGS
async def test_the_nil_dialect_says_nil_while_pending_and_for_unknown_ids(
    where: str, binding: vc.Binding
) -> None:
    simulator = Simulator()
    async with connected(simulator, where, binding=binding) as client:
        sent = await client.send_confirmation_sms("5551234567", "Did you ask?")
        pending = await client.has_been_verified(sent.request_id)
        unknown = await client.has_been_verified(12345)
    assert pending == vc.VerificationResult(verified=None)
    assert unknown == vc.VerificationResult(None, "Invalid SecureLink RequestID")


@WHERE
@BINDINGS
async def test_an_operation_that_throws(where: str, binding: vc.Binding) -> None:
    simulator = Simulator(config=SimulatorConfig(throws={VERIFIED}))
    async with connected(simulator, where, binding=binding, retry=vc.NO_RETRY) as client:
        assert await client.get_mobile_consent_text()  # the others still work
        with pytest.raises(vc.ResponseError) as caught:
            await client.has_been_verified(4294967297)
    error = caught.value
    assert error.status_code == 500
    if binding.is_soap:
        assert isinstance(error, vc.SoapFault)
        assert error.code == ("Server" if binding is vc.Binding.SOAP11 else "Receiver")
        assert not error.is_client_fault
        assert error.reason.startswith("Server was unable to process request. ---> ")
    else:
        assert isinstance(error, vc.HTTPStatusError)
        assert error.server_message == "System.Exception: The simulated operation failed."
    assert simulator.calls(VERIFIED)[-1].status == 500


def test_throws_names_only_operations() -> None:
    with pytest.raises(ValueError, match="'Nope' is not an operation"):
        SimulatorConfig(throws={"Nope"})
    with pytest.raises(ValueError, match="verified_dialect"):
        SimulatorConfig(verified_dialect="maybe")  # type: ignore[arg-type]


@WHERE
@BINDINGS
async def test_a_cr_is_written_raw_and_read_as_a_line_feed(where: str, binding: vc.Binding) -> None:
    simulator = Simulator()
    simulator.consent_text = "one\rtwo\r\nthree"
    async with connected(simulator, where, binding=binding) as client:
        text = await client.get_mobile_consent_text()
    assert text == "one\ntwo\nthree"


async def test_the_cr_is_raw_on_the_wire() -> None:
    simulator = Simulator()
    simulator.consent_text = "a\rb"
    transport = httpx.ASGITransport(app=simulator)
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as http:
        bare = await http.get(f"{EP}/GetMobileConsentText")
    assert b"a\rb" in bare.content
    assert b"&#xD;" not in bare.content


def test_the_command_line_sets_the_dialect_and_what_throws() -> None:
    from verif_client.simulator import _main

    args = _main.build_parser().parse_args(
        ["--verified-dialect", "bool", "--throws", VERIFIED, "--throws", "RevokeMobileConsent"]
    )
    simulator = _main.simulator_from_args(args)
    assert simulator.config.verified_dialect == "bool"
    assert simulator.config.throws == {VERIFIED, "RevokeMobileConsent"}
    default = _main.simulator_from_args(_main.build_parser().parse_args([]))
    assert (default.config.verified_dialect, default.config.throws) == ("nil", frozenset())
