"""transport= with a verif_client.Transport: Simulator.transport() and a user's own."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import anyio
import httpx
import pytest

import verif_client as vc
from verif_client.simulator import Simulator, SimulatorConfig, SimulatorTransport

pytestmark = pytest.mark.anyio

BINDINGS = ("soap11", "soap12", "http-get", "http-post")


def client(transport: Any, **options: Any) -> vc.VerificationClient:
    return vc.VerificationClient(
        "http://sim", username="user", password="pass", transport=transport, **options
    )


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_simulator_transport_answers_as_the_asgi_transport_does(binding: str) -> None:
    logs = []
    for make in (Simulator.transport, lambda sim: httpx.ASGITransport(app=sim)):
        sim = Simulator(credentials=("user", "pass"))
        async with client(make(sim), binding=binding) as c:
            sent = await c.send_confirmation_sms("5551234567", "Did you ask to pay?")
            sim.verify(sent.request_id)
            assert (await c.has_been_verified(sent.request_id)).verified is True
            assert await c.get_mobile_consent_text() == sim.consent_text
            assert await c.revoke_mobile_consent("5551234567") in (True, False)
        logs.append([(r.operation, r.binding, r.params, r.status, r.method) for r in sim.requests])
    assert logs[0] == logs[1]
    assert isinstance(Simulator().transport(), SimulatorTransport)


async def test_a_dropped_send_is_delivery_unknown_and_sent_once() -> None:
    sim = Simulator(config=SimulatorConfig(drop=1.0))
    async with client(sim.transport()) as c:
        with pytest.raises(vc.DeliveryUnknownError, match="Server disconnected"):
            await c.send_confirmation_sms("5551234567", "Did you ask to pay?")
    assert len(sim.secure_links) == 1
    assert [r.dropped for r in sim.requests] == [True]


async def test_a_slow_simulator_ends_within_the_attempt_deadline() -> None:
    sim = Simulator(config=SimulatorConfig(latency=60.0))
    async with client(sim.transport(), timeout=0.2) as c:
        with anyio.fail_after(10), pytest.raises(vc.DeliveryUnknownError, match="Timeout"):
            await c.send_confirmation_sms("5551234567", "Did you ask to pay?")


async def test_an_answer_over_the_cap_is_refused() -> None:
    sim = Simulator()
    sim.consent_text = "x" * 5000
    async with client(sim.transport(), max_response_bytes=1000) as c:
        with pytest.raises(vc.ResponseTooLargeError):
            await c.get_mobile_consent_text()


class Scripted:
    """A user's own transport: answers from a list, failures included."""

    def __init__(self, answers: Sequence[object]) -> None:
        self.answers = list(answers)
        self.requests: list[vc.HTTPRequest] = []
        self.closed = False

    async def send(
        self, request: vc.HTTPRequest, *, time_limit: float, max_response_bytes: int, operation: str
    ) -> tuple[int, Sequence[tuple[str, str]], bytes]:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        assert isinstance(answer, tuple)
        return answer

    async def aclose(self) -> None:
        self.closed = True


class Refusing:
    """A user's own transport: refuses its first connection, then relays to a simulator."""

    def __init__(self, sim: Simulator) -> None:
        self.inner = sim.transport()
        self.sends = 0
        self.closed = False

    async def send(
        self, request: vc.HTTPRequest, *, time_limit: float, max_response_bytes: int, operation: str
    ) -> tuple[int, Sequence[tuple[str, str]], bytes]:
        self.sends += 1
        if self.sends == 1:
            raise vc.SendError("ConnectError: refused", never_sent=True)
        return await self.inner.send(
            request,
            time_limit=time_limit,
            max_response_bytes=max_response_bytes,
            operation=operation,
        )

    async def aclose(self) -> None:
        self.closed = True


async def test_a_users_transport_is_driven_directly_and_closed_with_the_client() -> None:
    sim = Simulator()
    own: vc.Transport = Refusing(sim)
    async with client(own) as c:
        # Never sent: retried even for a send, as with the default pool.
        sent = await c.send_confirmation_sms("5551234567", "q?")
        sim.verify(sent.request_id)
        assert (await c.has_been_verified(sent.request_id)).verified is True
    assert isinstance(own, Refusing)
    assert (own.sends, own.closed, len(sim.secure_links)) == (3, True, 1)


async def test_a_users_transport_failure_after_sending_is_not_repeated_for_a_send() -> None:
    own = Scripted([vc.SendError("ReadError: reset", never_sent=False)])
    async with client(own) as c:
        with pytest.raises(vc.DeliveryUnknownError, match="ReadError: reset"):
            await c.send_confirmation_sms("5551234567", "q?")
    assert len(own.requests) == 1


def test_import_leaves_out_what_a_first_call_does_not_need() -> None:
    code = (
        "import sys, verif_client\n"
        "lazy = ['verif_client._polling', 'verif_client._hooks', 'verif_client._otel',\n"
        "        'verif_client._sync', 'httpx', 'anyio.streams.memory']\n"
        "print([name for name in lazy if name in sys.modules])\n"
        "print(verif_client.VerificationOutcome.__module__, verif_client.Hooks.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "verif_client verif_client"]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_an_httpx_transport_gets_the_request_httpx_itself_would_build(binding: str) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=b"")

    async with client(httpx.MockTransport(answer), binding=binding, timeout=7.0) as c:
        for call in (
            c.send_confirmation_sms("5551234567", "Did you ask to pay? é"),
            c.get_mobile_consent_text(),
        ):
            with pytest.raises(vc.VerifClientError):
                await call
    codec = c.codec()
    for request, (op, params) in zip(
        seen,
        [
            (vc.SEND_CONFIRMATION_SMS, {"PhoneNumber": "5551234567"}),
            (vc.GET_MOBILE_CONSENT_TEXT, {}),
        ],
        strict=True,
    ):
        assert request.extensions["timeout"] == dict.fromkeys(
            ("connect", "read", "write", "pool"), 7.0
        )
        described = codec.encode(
            op,
            {**params, "ConfirmationQuestion": "Did you ask to pay? é"} if params else {},
            credentials=vc.Credentials("user", "pass"),
        )
        expected = httpx.Request(
            described.method,
            "http://sim" + described.path,
            headers=[*described.headers, ("Accept-Encoding", "gzip, deflate")],
            content=described.body,
        )
        assert (request.method, request.url, request.headers.raw, request.content) == (
            expected.method,
            expected.url,
            expected.headers.raw,
            expected.content,
        )
