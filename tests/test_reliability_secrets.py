"""The password never shows: not in errors, logs or reprs on any operation,
binding or error path, not in the CLI's output, the journal or the output file.
It goes on the wire only in the SOAP header."""

from __future__ import annotations

import logging
import subprocess
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from relsupport import ARGS, PASSWORD, USER, run_cli

import verif_client as vc
from verif_client.simulator import Simulator, SimulatorConfig, serve_in_thread

pytestmark = pytest.mark.anyio

PATHS = {
    "ok": SimulatorConfig(),
    "503": SimulatorConfig(fail_503=1.0),
    "drop": SimulatorConfig(drop=1.0),
    "malformed": SimulatorConfig(malformed=1.0),
    "blocked": SimulatorConfig(blocked=True),
    "wrong-password": SimulatorConfig(),
    "http-401": SimulatorConfig(credential_failure="http-401"),
}


class Recording(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.sent: list[bytes] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        self.sent.append(str(request.url).encode() + b" " + body)
        self.sent.append(b"".join(k + b":" + v for k, v in request.headers.raw))
        return await self.inner.handle_async_request(request)


def shown(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc) + repr(exc.args)


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("binding", list(vc.Binding))
async def test_no_error_path_shows_the_password(
    binding: vc.Binding, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    accepted = (USER, "another" if path == "wrong-password" else PASSWORD)
    simulator = Simulator(credentials=accepted, config=PATHS[path])
    transport = Recording(httpx.ASGITransport(app=simulator))
    texts = []
    async with vc.VerificationClient(
        "http://simulator",
        username=USER,
        password=PASSWORD,
        binding=binding,
        transport=transport,
        retry=vc.RetryPolicy(attempts=2, initial_backoff=0.001, max_backoff=0.001),
    ) as client:
        texts.append(repr(client))
        for op in vc.OPERATIONS:
            try:
                texts.append(repr(await client.call_with(op, ARGS[op.name])))
            except vc.VerifClientError as exc:
                texts.append(shown(exc))
            # A bad value is refused before sending, naming the value but not the password.
            bad = {**ARGS[op.name], "Nope": PASSWORD}
            with pytest.raises(vc.VerifClientError) as caught:
                await client.call_with(op, bad)
            texts.append(shown(caught.value))
    texts.append(caplog.text)
    for text in texts:
        assert PASSWORD not in text
    # On the wire: in SOAP bodies only; GET and POST carry no credentials at all.
    carried = [PASSWORD.encode() in sent for sent in transport.sent[::2]]
    assert carried
    assert all(carried) == binding.is_soap
    assert any(carried) == binding.is_soap
    assert not any(PASSWORD.encode() in headers for headers in transport.sent[1::2])


@pytest.fixture
def service() -> Iterator[str]:
    with serve_in_thread(Simulator(credentials=(USER, PASSWORD))) as server:
        yield server.base_url


def cli(*args: str, base_url: str, password: str = PASSWORD) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, base_url=base_url, password=password)


def test_cli_output_never_shows_the_password(tmp_path: Path, service: str) -> None:
    numbers = tmp_path / "in.csv"
    numbers.write_text("phone_number\n5125550100\n12\n5125550101\n")
    runs: list[Any] = [
        cli("call", "GetMobileConsentText", base_url=service),
        cli("call", "SecureLink_SecurityCode_HasBeenVerified", "RequestId=x", base_url=service),
        cli("call", "GetMobileConsentText", "--timeout", "5", base_url="http://127.0.0.1:9"),
        # Wrong credentials: the service refuses the password the CLI was given.
        cli("call", "GetMobileConsentText", base_url=service, password=PASSWORD + "-typo"),
    ]
    for run_id, password in (("ok", PASSWORD), ("refused", PASSWORD + "-typo")):
        journal, output = tmp_path / f"{run_id}.journal", tmp_path / f"{run_id}.jsonl"
        runs.append(
            cli(
                *("bulk", "run", "--input", str(numbers), "--question", "Is this you?"),
                *("--journal", str(journal), "--output", str(output), "--deadline", "2s"),
                base_url=service,
                password=password,
            )
        )
    # The refused job stops at once, its rows queued for a rerun: exit 1.
    assert [run.returncode for run in runs] == [0, 2, 1, 1, 0, 1]
    assert "Invalid API Credentials" in runs[3].stderr
    for run in runs:
        assert PASSWORD not in run.stdout + run.stderr
    for path in tmp_path.iterdir():
        assert PASSWORD.encode() not in path.read_bytes(), path
    assert "refused the credentials" in runs[5].stderr
    assert '"status": "failed"' not in (tmp_path / "refused.jsonl").read_text()
