"""What the connection layer promises besides surviving bad peers
(test_transport_bad_peers.py): how a user's httpx transport or client is used,
idle expiry, and that the default path does not load httpx."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.abc
import asmx
import httpx
import pytest
import trio.lowlevel
import trio.testing
from realparts import import_real_part
from relsupport import PASSWORD, USER
from test_transport_bad_peers import (
    GONE,
    NOT_VERIFIED,
    Wire,
    answer,
    http_response,
    raw_server,
)

import verif_client as vc
from verif_client._transport import _pool, _tls
from verif_client.simulator import Simulator

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent


class Recording(httpx.AsyncBaseTransport):
    """Answers through the simulator and keeps what it was handed."""

    def __init__(self) -> None:
        self.inner = httpx.ASGITransport(app=Simulator(credentials=(USER, PASSWORD)))
        self.requests: list[httpx.Request] = []
        self.closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        self.closed = True


async def test_a_transport_is_called_directly_and_closed_with_the_client() -> None:
    transport = Recording()
    async with vc.VerificationClient(
        "http://s", username=USER, password=PASSWORD, transport=transport
    ) as client:
        assert await client.get_mobile_consent_text()
    (request,) = transport.requests
    # An AsyncClient around it would have added its own headers (python-httpx's User-Agent).
    assert "python-httpx" not in request.headers.get("user-agent", "")
    assert request.extensions["timeout"]["read"] == 30.0
    assert transport.closed


async def test_an_injected_client_never_follows_redirects() -> None:
    # The loopback version (a 307/308 to 127.0.0.2) is in test_transport_bad_peers.py.
    seen: list[str] = []

    def redirect(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(307, headers={"location": "http://elsewhere.test/steal"})

    async with httpx.AsyncClient(
        transport=httpx.MockTransport(redirect), follow_redirects=True
    ) as http:
        async with vc.VerificationClient("http://s", http_client=http, retry=vc.NO_RETRY) as c:
            with pytest.raises(vc.HTTPStatusError):
                await c.get_mobile_consent_text()
        assert not http.is_closed
    assert len(seen) == 1
    assert "elsewhere" not in seen[0]


class Answering:
    """A raw server's handler: every request on a connection gets ``raw``;
    counts the connections opened to it."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.connections = 0

    async def __call__(self, stream: anyio.abc.SocketStream) -> None:
        self.connections += 1
        wire = Wire(stream)
        while await wire.request() is not None:
            await stream.send(self.raw)


async def test_an_idle_connection_past_its_expiry_is_not_reused() -> None:
    handle = Answering(NOT_VERIFIED)

    op = vc.get_operation("SecureLink_SecurityCode_HasBeenVerified")
    request = vc.codec_for(vc.Binding.SOAP11).encode(op, {"RequestId": 4294967297})
    async with raw_server(handle) as port:
        for expiry, expected in ((60.0, 1), (0.0, 2)):
            handle.connections = 0
            pool = _pool.ConnectionPool(f"http://127.0.0.1:{port}", keepalive_expiry=expiry)
            try:
                for _ in range(2):
                    status, _, _ = await pool.send(
                        request, time_limit=10, max_response_bytes=1 << 20, operation=op.name
                    )
                    assert status == 200
            finally:
                await pool.aclose()
            assert handle.connections == expected


async def test_a_kept_connection_idle_past_its_expiry_is_not_reused_while_others_work() -> None:
    # The pool's connection sits idle while another client's call takes
    # longer than the pool's expiry (the peer's pace on that connection): the
    # pool's next call must open a new connection, on every loop (asyncio
    # takes a kept connection without a cancel scope, and checks its age there).
    pace = {2: 0.3}  # the second connection opened (the other client's) answers slowly

    class Paced(Answering):
        async def __call__(self, stream: anyio.abc.SocketStream) -> None:
            self.connections += 1
            delay = pace.get(self.connections, 0.0)
            wire = Wire(stream)
            while await wire.request() is not None:
                await anyio.sleep(delay)
                await stream.send(self.raw)

    handle = Paced(NOT_VERIFIED)
    op = vc.get_operation("SecureLink_SecurityCode_HasBeenVerified")
    request = vc.codec_for(vc.Binding.SOAP11).encode(op, {"RequestId": 4294967297})
    async with raw_server(handle) as port:
        pool = _pool.ConnectionPool(f"http://127.0.0.1:{port}", keepalive_expiry=0.2)
        try:

            async def send() -> int:
                status, _, _ = await pool.send(
                    request, time_limit=10, max_response_bytes=1 << 20, operation=op.name
                )
                return status

            assert await send() == 200
            async with vc.VerificationClient(
                f"http://127.0.0.1:{port}", username=USER, password=PASSWORD
            ) as other:
                assert (await other.has_been_verified(7)).verified is False
            assert await send() == 200
        finally:
            await pool.aclose()
    assert handle.connections == 3


class CountingOpen(Answering):
    """``Answering`` that also counts the connections still open to it."""

    def __init__(self, raw: bytes) -> None:
        super().__init__(raw)
        self.open = 0

    async def __call__(self, stream: anyio.abc.SocketStream) -> None:
        self.open += 1
        try:
            await super().__call__(stream)
        finally:
            self.open -= 1


def test_connections_a_shrinking_load_no_longer_needs_are_closed() -> None:
    """Eight calls at once open eight connections; then one call a second
    keeps reusing the newest. The seven below it must not stay open forever:
    from the keep-alive expiry (5 s) on, one is closed as each call returns.
    On trio's clock, moved by hand (sockets are real, time is not); the peer
    counts the connections still open once every task has settled."""
    handle = CountingOpen(NOT_VERIFIED)

    async def main() -> tuple[int, list[int]]:
        clock = trio.lowlevel.current_clock()
        assert isinstance(clock, trio.testing.MockClock)
        async with raw_server(handle) as port:
            base_url = f"http://127.0.0.1:{port}"
            async with vc.VerificationClient(base_url, username=USER, password=PASSWORD) as c:
                async with anyio.create_task_group() as tg:
                    for _ in range(8):
                        tg.start_soon(c.has_been_verified, 4294967297)
                await trio.testing.wait_all_tasks_blocked()
                at_peak, open_after = handle.open, []
                for _ in range(12):
                    clock.jump(1.0)
                    await c.has_been_verified(4294967297)
                    await trio.testing.wait_all_tasks_blocked()
                    open_after.append(handle.open)
                return at_peak, open_after

    at_peak, open_after = anyio.run(
        main, backend="trio", backend_options={"clock": trio.testing.MockClock()}
    )
    assert (handle.connections, at_peak) == (8, 8)
    # Seconds 1-4: all kept; 5: the oldest has been idle 5 s; then one a second down to one.
    assert open_after == [8, 8, 8, 8, 7, 6, 5, 4, 3, 2, 1, 1]


def test_tls_trusts_certifis_bundle_by_default() -> None:
    certifi = import_real_part("certifi", "httpx's certificate bundle")
    assert _tls._ca_bundle() == certifi.where()


def test_the_default_path_does_not_import_httpx() -> None:
    script = (
        "import sys, anyio, verif_client as vc\n"
        "async def main():\n"
        "    async with vc.VerificationClient('http://127.0.0.1:9', retry=vc.NO_RETRY) as c:\n"
        "        try:\n"
        "            await c.get_mobile_consent_text()\n"
        "        except vc.TransportError as exc:\n"
        "            print(type(exc).__name__)\n"
        "anyio.run(main)\n"
        "print('httpx' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["TransportError", "False"]


async def test_an_answer_larger_than_any_read_comes_back_whole_on_a_reused_connection() -> None:
    # The pool has asyncio read 64 KiB at a time (not 256 KiB: see
    # _read_in_heap_sized_chunks); 600 KB spans many reads and the old size.
    text = "".join(f"{i:07d} " for i in range(75_000))
    big = http_response(
        answer(
            "GetMobileConsentText",
            f"<GetMobileConsentTextResult>{text}</GetMobileConsentTextResult>",
        )
    )
    handle = Answering(big)

    async with (
        raw_server(handle) as port,
        vc.VerificationClient(
            f"http://127.0.0.1:{port}", max_response_bytes=1 << 20, retry=vc.NO_RETRY
        ) as client,
    ):
        for _ in range(3):
            assert await client.get_mobile_consent_text() == text
    assert handle.connections == 1


async def test_each_request_goes_out_with_its_own_head_and_framing() -> None:
    # One connection carries them all: each request keeps its own method,
    # target and SOAPAction (the heads are cached per shape), a GET goes with
    # no body and no Content-Length, and a POST with its length, even empty.
    consent = vc.get_operation("GetMobileConsentText")
    revoke = vc.get_operation("RevokeMobileConsent")
    calls = [
        (vc.Binding.SOAP11, consent, "text"),
        (vc.Binding.SOAP11, revoke, "true"),
        (vc.Binding.HTTP_GET, consent, "text"),
        (vc.Binding.HTTP_POST, consent, "text"),
        (vc.Binding.HTTP_POST, revoke, "true"),
    ]
    seen: list[bytes] = []
    connections = 0

    async def handle(stream: anyio.abc.SocketStream) -> None:
        nonlocal connections
        connections += 1
        wire = Wire(stream)
        for binding, op, content in calls:
            request = await wire.request()
            if request is None:
                return
            seen.append(request)
            await stream.send(http_response(asmx.response(binding, op, content)))

    async with (
        raw_server(handle) as port,
        vc.VerificationClient(
            f"http://127.0.0.1:{port}", username=USER, password=PASSWORD, retry=vc.NO_RETRY
        ) as client,
    ):
        for binding, op, _ in calls:
            if op is consent:
                assert await client.get_mobile_consent_text(binding=binding) == "text"
            else:
                assert await client.revoke_mobile_consent("5551234567", binding=binding) is True
    assert connections == 1
    heads = [request.partition(b"\r\n\r\n")[0].lower() for request in seen]
    bodies = [request.partition(b"\r\n\r\n")[2] for request in seen]
    path = b"/verificationservices/v5/inquiriesws-5-8.asmx"
    assert heads[0].startswith(b"post %s http/1.1\r\n" % path)
    assert (
        b'\r\nsoapaction: "http://api.giact.com/verificationservices/v5/getmobileconsenttext"'
        in heads[0]
    )
    assert (
        b'\r\nsoapaction: "http://api.giact.com/verificationservices/v5/revokemobileconsent"'
        in heads[1]
    )
    assert heads[2].startswith(b"get %s/getmobileconsenttext http/1.1\r\n" % path)
    assert b"content-length" not in heads[2]
    assert bodies[2] == b""
    assert heads[3].startswith(b"post %s/getmobileconsenttext http/1.1\r\n" % path)
    assert heads[4].startswith(b"post %s/revokemobileconsent http/1.1\r\n" % path)
    for head, body in zip(heads, bodies, strict=True):
        if head.startswith(b"post"):
            assert b"\r\ncontent-length: %d" % len(body) in head
    assert bodies[4].endswith(b"MobileNumber=5551234567")


@pytest.mark.parametrize(
    ("path", "namespace", "refused"),
    [
        ("/a b", "http://api.giact.com/verificationservices/v5", "illegal request line POST '/a b"),
        ("", "http://x/\r\nX-Injected: 1", "illegal header 'SOAPAction'"),
    ],
    ids=["space-in-the-path", "line-break-in-a-header"],
)
async def test_a_request_that_could_smuggle_another_is_refused_before_a_byte_leaves(
    path: str, namespace: str, refused: str
) -> None:
    received: list[bytes] = []

    async def handle(stream: anyio.abc.SocketStream) -> None:
        with contextlib.suppress(*GONE):
            while True:
                received.append(await stream.receive())

    async with (
        raw_server(handle) as port,
        vc.VerificationClient(
            f"http://127.0.0.1:{port}{path}", namespace=namespace, retry=vc.NO_RETRY
        ) as client,
    ):
        with pytest.raises(
            vc.TransportError, match=f"LocalProtocolError: {re.escape(refused)}"
        ) as caught:
            await client.send_confirmation_sms("5551234567", "Pay?")
    # Provably never sent: not "delivery unknown", though an SMS is not sent twice lightly.
    assert not isinstance(caught.value, vc.DeliveryUnknownError)
    assert received == []
