"""The connection layer against bad peers: raw TCP servers of the test's own.

Each server here writes bytes by hand, the way a broken or hostile service
would, and each test asserts the library's typed error (never an h11, anyio or
httpx exception) and that the call ended within its deadline (a generous
``fail_after`` guard: no timing is asserted). The servers' pauses are the
attack itself (a trickle, a stream of 100-Continues); nothing waits on a sleep.
"""

from __future__ import annotations

import gzip
import re
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from functools import partial
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import asmx
import httpx
import pytest
from relsupport import (
    PASSWORD,
    PATCHES_THE_POOL,
    USER,
    WITH_UVLOOP,
    client_sockets_to,
    task_count,
    wait_for,
)

import verif_client as vc
from verif_client._codec import HTTPRequest
from verif_client._transport import SendError, _pool

# The pool's answers read by llhttp and by h11 alike.
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("answer_parser")]


@pytest.fixture(params=WITH_UVLOOP)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


Handler = Callable[[anyio.abc.SocketStream], Awaitable[None]]
GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError)
SEND = "SecureLink_Confirmation_SendRequestViaSms"
VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"
FAST_RETRY = vc.RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=0.002, deadline=1.5)
# Without one deadline per attempt, these peers hold a call for a minute or more.
GUARD = 15


def answer(operation: str, content: str) -> bytes:
    return asmx.response(vc.Binding.SOAP11, vc.get_operation(operation), content)


def http_response(body: bytes, *, status: bytes = b"200 OK", headers: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 %s\r\nContent-Type: text/xml; charset=utf-8\r\nContent-Length: %d\r\n%s\r\n%s"
        % (status, len(body), headers, body)
    )


SMS_SENT = http_response(answer(SEND, "<SecureLinkRequestId>7</SecureLinkRequestId>"))
NOT_VERIFIED = http_response(answer(VERIFIED, "<Verified>false</Verified>"))
VERIFIED_TRUE = http_response(answer(VERIFIED, "<Verified>true</Verified>"))


class Wire:
    """Reads whole requests (head and Content-Length body) off one server connection."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def _more(self) -> bool:
        try:
            self.buffer += await self.stream.receive()
        except GONE:
            return False
        return True

    async def request(self) -> bytes | None:
        """The next request, or None once the client hung up."""
        while b"\r\n\r\n" not in self.buffer:
            if not await self._more():
                return None
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        self.buffer = rest
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(self.buffer) < length:
            if not await self._more():
                return None
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return head + b"\r\n\r\n" + body


@asynccontextmanager
async def raw_server(handle: Handler, host: str = "127.0.0.1") -> AsyncIterator[int]:
    """Serve ``handle`` on a loopback port of this event loop; yield the port."""

    async def guarded(stream: anyio.abc.SocketStream) -> None:
        # The client hanging up is what a bad peer sees when it is cut off.
        async with stream:
            with suppress(*GONE):
                await handle(stream)

    listener = await anyio.create_tcp_listener(local_host=host, local_port=0)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, guarded)
        yield listener.extra(anyio.abc.SocketAttribute.local_port)
        tg.cancel_scope.cancel()


class MisbehavingWhileIdle:
    """Answers every request with ``answer``; on its first connection, once the
    test sets ``idle`` (the client has put the connection back), runs
    ``misbehave`` on it. Counts the connections it was given."""

    def __init__(
        self, answer: bytes, misbehave: Callable[[anyio.abc.ByteStream], Awaitable[None]]
    ) -> None:
        self.answer = answer
        self.misbehave = misbehave
        self.idle = anyio.Event()
        self.done = anyio.Event()
        self.connections = 0

    async def __call__(self, stream: anyio.abc.ByteStream) -> None:
        self.connections += 1
        first = self.connections == 1
        wire = Wire(stream)
        while await wire.request() is not None:
            await stream.send(self.answer)
            if first:
                await self.idle.wait()
                try:
                    await self.misbehave(stream)
                finally:
                    self.done.set()


def client(port: int, **options: Any) -> vc.VerificationClient:
    return vc.VerificationClient(
        f"http://127.0.0.1:{port}", username=USER, password=PASSWORD, **options
    )


async def send_sms(client: vc.VerificationClient) -> vc.RequestResult:
    return await client.send_confirmation_sms("5125550100", "Is this you?")


# -- one deadline per attempt ------------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.requests = 0


def trickling(counter: Counter, response: bytes) -> Handler:
    """Answers one byte every 0.1 s: each read is quick, the whole answer takes a minute."""

    async def handle(stream: anyio.abc.SocketStream) -> None:
        wire = Wire(stream)
        while await wire.request() is not None:
            counter.requests += 1
            for index in range(len(response)):
                await stream.send(response[index : index + 1])
                await anyio.sleep(0.1)

    return handle


def continuing(counter: Counter) -> Handler:
    """A 100 Continue every 0.3 s, forever: under a 0.5 s read timeout each time."""

    async def handle(stream: anyio.abc.SocketStream) -> None:
        wire = Wire(stream)
        while await wire.request() is not None:
            counter.requests += 1
            while True:
                await stream.send(b"HTTP/1.1 100 Continue\r\n\r\n")
                await anyio.sleep(0.3)

    return handle


@pytest.mark.parametrize("peer", ["trickle", "100-continue"])
async def test_a_slow_peer_cannot_hold_an_sms_past_its_deadline(peer: str) -> None:
    counter = Counter()
    handle = trickling(counter, SMS_SENT) if peer == "trickle" else continuing(counter)
    async with raw_server(handle) as port, client(port, timeout=0.5, retry=FAST_RETRY) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.DeliveryUnknownError) as caught:
            await send_sms(c)
    assert "may have reached the service" in str(caught.value)
    assert PASSWORD not in str(caught.value)
    assert counter.requests == 1  # sent exactly once


@pytest.mark.parametrize("peer", ["trickle", "100-continue"])
async def test_a_slow_peer_cannot_hold_a_poll_past_its_deadline(peer: str) -> None:
    counter = Counter()
    handle = trickling(counter, NOT_VERIFIED) if peer == "trickle" else continuing(counter)
    async with raw_server(handle) as port, client(port, timeout=0.5, retry=FAST_RETRY) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.TransportError) as caught:
            await c.has_been_verified(4294967297)
    assert not isinstance(caught.value, vc.DeliveryUnknownError)
    assert "Timeout" in str(caught.value)
    assert 1 <= counter.requests <= FAST_RETRY.attempts


def slow_after_first_answer(counter: Counter, slow: Handler) -> Handler:
    """Answers its first connection's first request at once, then is ``slow``
    on that same connection; later connections are answered at once."""

    async def handle(stream: anyio.abc.SocketStream) -> None:
        counter.requests += 1
        first_connection = counter.requests == 1
        wire = Wire(stream)
        if await wire.request() is None:
            return
        await stream.send(NOT_VERIFIED)
        if first_connection:
            await slow(_Replayed(stream, wire))
            return
        while await wire.request() is not None:
            await stream.send(NOT_VERIFIED)

    return handle


class _Replayed:
    """A stream whose first requests come out of a Wire's buffer first."""

    def __init__(self, stream: anyio.abc.SocketStream, wire: Wire) -> None:
        self.stream = stream
        self.wire = wire

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self.wire.buffer:
            data, self.wire.buffer = self.wire.buffer, b""
            return data
        return await self.stream.receive(max_bytes)

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)


@pytest.mark.parametrize("peer", ["trickle", "100-continue", "silent"])
async def test_a_slow_peer_on_a_kept_connection_cannot_hold_a_call_past_its_deadline(
    peer: str,
) -> None:
    # The second call goes on the connection the first one left idle: on
    # asyncio its deadline cuts the receiver's wait, not a cancel scope's.
    slow_requests = Counter()

    async def silent(stream: Any) -> None:
        await Wire(stream).request()
        await anyio.sleep_forever()

    slow = {
        "trickle": trickling(slow_requests, SMS_SENT),
        "100-continue": continuing(slow_requests),
        "silent": silent,
    }[peer]
    connections = Counter()
    handle = slow_after_first_answer(connections, slow)
    once = vc.RetryPolicy(attempts=1)
    async with raw_server(handle) as port, client(port, timeout=0.5, retry=once) as c:
        with anyio.fail_after(GUARD):
            assert (await c.has_been_verified(7)).verified is False
            with pytest.raises(vc.DeliveryUnknownError) as caught:
                await send_sms(c)
            # The connection the deadline cut is never used again.
            assert (await c.has_been_verified(7)).verified is False
    assert "Timeout" in str(caught.value)
    assert PASSWORD not in str(caught.value)
    assert connections.requests == 2


@pytest.mark.parametrize("kept", [2, 1])
async def test_a_call_with_less_time_left_is_cut_at_its_own_deadline(kept: int) -> None:
    # A call with the client's 30 s hangs on a kept connection; a call whose
    # retry deadline leaves it 0.3 s goes on the other kept one (kept=2) or
    # on a new connection (kept=1). Its deadline comes before the one already
    # waiting: it must still be cut at its own, not left to wait behind the first.
    both_asked = anyio.Event()
    requests = Counter()

    async def handle(stream: anyio.abc.SocketStream) -> None:
        wire = Wire(stream)
        while await wire.request() is not None:
            requests.requests += 1
            if requests.requests <= kept:
                if requests.requests == kept:
                    both_asked.set()
                await both_asked.wait()
                await stream.send(NOT_VERIFIED)
            # Every later request is never answered.

    hung_call_ended = False

    async def hung_call(c: vc.VerificationClient) -> None:
        nonlocal hung_call_ended
        with suppress(vc.TransportError):
            await c.has_been_verified(1)
        hung_call_ended = True

    once = vc.RetryPolicy(attempts=1)
    short = vc.RetryPolicy(attempts=1, deadline=0.3)
    async with raw_server(handle) as port, client(port, timeout=30, retry=once) as c:
        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as warm:
                for request_id in range(kept):
                    warm.start_soon(c.has_been_verified, request_id)
            async with anyio.create_task_group() as tg:
                tg.start_soon(hung_call, c)
                await wait_for(lambda: requests.requests == kept + 1, "the first call's request")
                with pytest.raises(vc.TransportError) as caught:
                    await c.call_with(VERIFIED, {"RequestId": 3}, retry=short)
                assert not hung_call_ended
                tg.cancel_scope.cancel()
    assert "Timeout" in str(caught.value)
    assert requests.requests == kept + 2


async def test_a_kept_connection_is_never_cut_by_the_deadline_of_a_call_it_carried_before() -> None:
    # Two connections, each used once to open it and once more, kept: then
    # two slow calls in a row (0.6 s each, under a 1 s limit) on the newest,
    # while the other sits idle past the deadline of the call it last
    # carried. A deadline outliving its call would cut whatever that idle
    # connection carries next; the last two calls, one on each, must succeed.
    requests = Counter()

    async def slow_in_the_middle(stream: anyio.abc.SocketStream) -> None:
        wire = Wire(stream)
        while await wire.request() is not None:
            requests.requests += 1
            if requests.requests in (5, 6):
                await anyio.sleep(0.6)  # the peer's pace: within each call's limit
            await stream.send(NOT_VERIFIED)

    async def two_at_once(c: vc.VerificationClient) -> list[vc.VerificationResult]:
        results: list[vc.VerificationResult] = []

        async def one() -> None:
            results.append(await c.has_been_verified(7))

        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
        return results

    once = vc.RetryPolicy(attempts=1)
    async with (
        raw_server(slow_in_the_middle) as port,
        client(port, timeout=1.0, retry=once) as c,
    ):
        with anyio.fail_after(GUARD):
            results = await two_at_once(c)  # opens two connections
            results += await two_at_once(c)  # one call on each, kept
            results += [await c.has_been_verified(7) for _ in range(2)]  # the newest, slowly
            results += await two_at_once(c)  # one on each again
    assert [result.verified for result in results] == [False] * 8
    assert requests.requests == 8


def _chunked(body: bytes) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/xml; charset=utf-8\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    )


# Declared too long (refused from its head), or chunked: then only counting
# what came tells, and the whole answer comes in one read (the pool's path
# for a body that needs no reader).
def _chunked_in_pieces(body: bytes) -> bytes:
    third = len(body) // 3 + 1
    pieces = [body[at : at + third] for at in range(0, len(body), third)]
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/xml; charset=utf-8\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
        + b"0\r\n\r\n"
    )


FRAMINGS = {
    "content-length": http_response,
    "chunked": _chunked,
    "chunked in pieces": _chunked_in_pieces,
}


@pytest.mark.parametrize("framing", list(FRAMINGS))
async def test_an_answer_over_the_cap_on_a_kept_connection_names_its_operation(
    framing: str,
) -> None:
    # The second call goes on the connection the first left idle (on asyncio,
    # the attempt without a cancel scope): its refusal says which call it was.
    big = FRAMINGS[framing](answer(VERIFIED, "<Verified>false</Verified>" + " " * 4096))
    bodies = iter([NOT_VERIFIED, big])

    async def handle(stream: anyio.abc.SocketStream) -> None:
        wire = Wire(stream)
        while await wire.request() is not None:
            await stream.send(next(bodies))

    once = vc.RetryPolicy(attempts=1)
    async with (
        raw_server(handle) as port,
        client(port, retry=once, max_response_bytes=2048) as c,
    ):
        with anyio.fail_after(GUARD):
            assert (await c.has_been_verified(7)).verified is False
            with pytest.raises(vc.ResponseTooLargeError) as caught:
                await c.has_been_verified(7)
    assert caught.value.operation == VERIFIED


# -- connections that must not be reused --------------------------------------


@pytest.mark.parametrize("when", ["same-write", "after-the-answer"])
async def test_an_unrequested_answer_never_answers_the_next_call(when: str) -> None:
    connections = 0
    queued = anyio.Event()

    async def handle(stream: anyio.abc.SocketStream) -> None:
        nonlocal connections
        connections += 1
        first = connections == 1
        wire = Wire(stream)
        while await wire.request() is not None:
            if first and when == "same-write":
                await stream.send(NOT_VERIFIED + VERIFIED_TRUE)
            elif first:
                await stream.send(NOT_VERIFIED)
                await stream.send(VERIFIED_TRUE)
            else:
                await stream.send(NOT_VERIFIED)
            queued.set()

    async with raw_server(handle) as port, client(port, retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD):
            assert (await c.has_been_verified(4294967297)).verified is False
            await queued.wait()
            # The queued "true" sits on the first connection: a false VERIFIED if read.
            assert (await c.has_been_verified(4294967298)).verified is False
    assert connections == 2


class EndingTheFirstConnection:
    """Answers every request with an SMS sent (keep-alive: nothing says it will
    close), counting requests per connection in ``served``; the first
    connection is ended by ``end`` right after its first answer."""

    def __init__(self, end: Callable[[anyio.abc.ByteStream], Awaitable[None]]) -> None:
        self.end = end
        self.ended = anyio.Event()
        self.served: list[int] = []

    async def __call__(self, stream: anyio.abc.ByteStream) -> None:
        index = len(self.served)
        self.served.append(0)
        wire = Wire(stream)
        while await wire.request() is not None:
            self.served[index] += 1
            await stream.send(SMS_SENT)
            if index == 0:
                await self.end(stream)
                self.ended.set()
                return


async def test_a_connection_the_server_closed_while_idle_is_never_used() -> None:
    async def close(stream: anyio.abc.ByteStream) -> None:
        await stream.aclose()

    handle = EndingTheFirstConnection(close)
    async with raw_server(handle) as port, client(port, retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD):
            assert (await send_sms(c)).request_id == 7
            await handle.ended.wait()
            # Written into the closed connection, this SMS would be "delivery unknown".
            assert (await send_sms(c)).request_id == 7
    assert handle.served == [1, 1]


@PATCHES_THE_POOL
@pytest.mark.parametrize("retried", [True, False], ids=["retried", "no-retry"])
async def test_a_write_the_kernel_refuses_was_never_sent_and_goes_out_once_elsewhere(
    monkeypatch: pytest.MonkeyPatch, retried: bool
) -> None:
    # The race no idle check can close: the peer resets the connection after
    # the check and before the write. write(2) then takes no byte, so the SMS
    # provably never left: it is sent once, on a fresh connection, not
    # reported as "delivery unknown". Without retries, the caller is told
    # it was a write that failed.
    async def reset(stream: anyio.abc.ByteStream) -> None:
        # Closed with a reset (linger 0) when the handler returns.
        sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    handle = EndingTheFirstConnection(reset)

    checked: list[bool] = []
    idle_check = _pool._untouched

    def too_early(connection: Any) -> bool:
        checked.append(idle_check(connection))
        return True  # what the check saw before the reset came

    retry = FAST_RETRY if retried else vc.NO_RETRY
    async with raw_server(handle) as port, client(port, retry=retry) as c:
        with anyio.fail_after(GUARD):
            assert (await send_sms(c)).request_id == 7
            (idle,) = c._connections._idle  # type: ignore[union-attr]
            await wait_for(lambda: not idle_check(idle), "the reset reached the client")
            monkeypatch.setattr(_pool, "_untouched", too_early)
            if retried:
                assert (await send_sms(c)).request_id == 7
            else:
                with pytest.raises(vc.TransportError) as caught:
                    await send_sms(c)
    assert checked == [False]
    if retried:
        assert handle.served == [1, 1]
    else:
        assert handle.served == [1]
        assert not isinstance(caught.value, vc.DeliveryUnknownError)
        assert ": WriteError: [Errno " in str(caught.value), caught.value


async def test_a_call_cancelled_before_it_writes_sends_nothing_and_keeps_the_connection() -> None:
    # The request goes out with one write(2) and no yield before it: the
    # cancellation must be taken first, or a cancelled SMS would still go out.
    served: list[int] = []

    async def handle(stream: anyio.abc.SocketStream) -> None:
        served.append(0)
        wire = Wire(stream)
        while await wire.request() is not None:
            served[-1] += 1
            await stream.send(SMS_SENT)

    async with raw_server(handle) as port, client(port, retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD):
            assert (await send_sms(c)).request_id == 7
            with anyio.CancelScope() as scope:
                scope.cancel()
                await send_sms(c)
            assert scope.cancelled_caught
            assert (await send_sms(c)).request_id == 7
    assert served == [2]  # two SMS, one connection: the cancelled call wrote nothing


def close_delimited(framing: str) -> bytes:
    """A HasBeenVerified ``true`` whose end is the server's close."""
    body = answer(VERIFIED, "<Verified>true</Verified>")
    if framing == "http/1.0":
        return b"HTTP/1.0 200 OK\r\nContent-Type: text/xml\r\n\r\n" + body
    return http_response(body, headers=b"Connection: close\r\n")


class AnswerOnceAndClose:
    """Answers one request per connection with ``raw``, then closes; counts connections."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.connections = 0

    async def __call__(self, stream: anyio.abc.ByteStream) -> None:
        self.connections += 1
        if await Wire(stream).request() is not None:
            await stream.send(self.raw)


@pytest.mark.parametrize("framing", ["http/1.0", "connection-close"])
async def test_close_delimited_answers_are_read_and_never_reused(framing: str) -> None:
    handle = AnswerOnceAndClose(close_delimited(framing))
    async with raw_server(handle) as port, client(port, retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD):
            for request_id in (4294967297, 4294967298):
                assert (await c.has_been_verified(request_id)).verified is True
    assert handle.connections == 2


# -- redirects ------------------------------------------------------------------


@pytest.mark.parametrize("status", [b"307 Temporary Redirect", b"308 Permanent Redirect"])
@pytest.mark.parametrize("way", ["default", "http_client", "transport"])
async def test_a_redirect_reaches_nothing_on_another_host(status: bytes, way: str) -> None:
    elsewhere = Counter()

    async def canary(stream: anyio.abc.SocketStream) -> None:
        wire = Wire(stream)
        while await wire.request() is not None:
            elsewhere.requests += 1
            await stream.send(SMS_SENT)

    async with raw_server(canary, host="127.0.0.2") as canary_port:
        location = b"http://127.0.0.2:%d%s/%s" % (
            canary_port,
            vc.ENDPOINT_PATH.encode(),
            SEND.encode(),
        )

        async def redirect(stream: anyio.abc.SocketStream) -> None:
            wire = Wire(stream)
            while await wire.request() is not None:
                await stream.send(
                    http_response(b"Moved", status=status, headers=b"Location: %s\r\n" % location)
                )

        async with raw_server(redirect) as port:
            options: dict[str, Any] = {}
            if way == "http_client":
                options["http_client"] = httpx.AsyncClient(follow_redirects=True)
            elif way == "transport":
                options["transport"] = httpx.AsyncHTTPTransport()
            try:
                async with client(port, retry=vc.NO_RETRY, **options) as c:
                    with anyio.fail_after(GUARD), pytest.raises(vc.HTTPStatusError) as caught:
                        await send_sms(c)
            finally:
                if "http_client" in options:
                    await options["http_client"].aclose()
    assert caught.value.status_code == int(status[:3])
    assert elsewhere.requests == 0


# -- broken framing, oversized answers -----------------------------------------

ONE_MB = 1024 * 1024
BROKEN: dict[str, bytes] = {
    "truncated-chunked": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"400\r\n<soap:Envelope"
    ),
    "content-length-too-large": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: 5000\r\n\r\n<a>short</a>"
    ),
    "close-after-headers": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: 90\r\n\r\n"
    ),
    "close-before-anything": b"",
    "one-megabyte-headers": b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * ONE_MB + b"\r\n\r\n",
    "not-http": b"SSH-2.0-OpenSSH_9.2\r\n\r\n",
}


def answering_then_closing(raw: bytes) -> Handler:
    async def handle(stream: anyio.abc.SocketStream) -> None:
        if await Wire(stream).request() is not None:
            await stream.send(raw)

    return handle


@pytest.mark.parametrize("shape", list(BROKEN))
async def test_broken_framing_is_a_typed_transport_error(shape: str) -> None:
    async with raw_server(answering_then_closing(BROKEN[shape])) as port:
        async with client(port, retry=vc.NO_RETRY) as c:
            with anyio.fail_after(GUARD), pytest.raises(vc.TransportError) as read_error:
                await c.get_mobile_consent_text()
        async with client(port, retry=FAST_RETRY) as c:
            with anyio.fail_after(GUARD), pytest.raises(vc.DeliveryUnknownError):
                await send_sms(c)
    assert not isinstance(read_error.value, vc.DeliveryUnknownError)
    assert read_error.value.operation == "GetMobileConsentText"
    # The parser's own words, which name what was wrong, reach the caller.
    assert str(read_error.value).startswith("GetMobileConsentText: RemoteProtocolError: ")


async def test_fifty_megabytes_close_delimited_are_refused_while_streaming() -> None:
    written = 0
    cut_off = anyio.Event()
    chunk = b"<a>" + b"x" * (64 * 1024)

    async def flood(stream: anyio.abc.SocketStream) -> None:
        nonlocal written
        try:
            if await Wire(stream).request() is not None:
                await stream.send(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
                while written < 50 * ONE_MB:
                    await stream.send(chunk)
                    written += len(chunk)
        finally:
            cut_off.set()

    async with raw_server(flood) as port, client(port, retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.ResponseTooLargeError) as refused:
            await c.get_mobile_consent_text()
        with anyio.fail_after(GUARD):
            await cut_off.wait()
    assert written < 25 * ONE_MB
    assert refused.value.operation == "GetMobileConsentText"


async def test_a_gzip_bomb_is_refused() -> None:
    bomb = gzip.compress(b"<a>" + b"\0" * (50 * ONE_MB), compresslevel=9)
    raw = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Encoding: gzip\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(bomb), bomb)
    )
    async with (
        raw_server(answering_then_closing(raw)) as port,
        client(port, retry=vc.NO_RETRY) as c,
    ):
        with anyio.fail_after(GUARD), pytest.raises(vc.ResponseTooLargeError):
            await c.get_mobile_consent_text()


# -- nothing left behind with 1,024 connections open -----------------------------

MANY = 1024


class Hang:
    """Runs on an event loop of its own thread (its tasks are not the client's):
    reads each request, never answers, and closes when the client does."""

    def __init__(self) -> None:
        self.waiting = 0

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            wire = Wire(stream)
            if await wire.request() is not None:
                self.waiting += 1
                while await wire._more():
                    pass


@contextmanager
def hanging_server() -> Iterator[tuple[Hang, int]]:
    hang = Hang()
    with anyio.from_thread.start_blocking_portal() as portal:
        listener = portal.call(partial(anyio.create_tcp_listener, local_host="127.0.0.1"))
        serving = portal.start_task_soon(listener.serve, hang.handle)
        try:
            yield hang, listener.extra(anyio.abc.SocketAttribute.local_port)
        finally:
            serving.cancel()
            portal.call(listener.aclose)


@pytest.mark.parametrize("how", ["cancel", "aclose"])
async def test_nothing_is_left_behind_with_1024_connections_open(how: str) -> None:
    with hanging_server() as (hang, port):
        baseline = task_count()
        c = client(port, max_connections=MANY, retry=vc.NO_RETRY)
        errors: list[BaseException] = []

        async def one() -> None:
            try:
                await c.get_mobile_consent_text()
            except vc.VerifClientError as exc:
                errors.append(exc)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for _ in range(MANY):
                    tg.start_soon(one)
                await wait_for(lambda: hang.waiting == MANY, "every call in flight", 60)
                assert client_sockets_to(port) == MANY
                if how == "cancel":
                    tg.cancel_scope.cancel()
                else:
                    await c.aclose()
            await wait_for(lambda: client_sockets_to(port) == 0, "every socket closed")
            await c.aclose()
        assert task_count() == baseline
        if how == "aclose":
            assert len(errors) == MANY
            assert all(type(exc) is vc.TransportError for exc in errors), errors[:3]
        else:
            assert errors == []


async def test_a_peer_that_takes_an_sms_and_hangs_up_is_named_and_delivery_unknown() -> None:
    async def take_and_hang_up(stream: anyio.abc.SocketStream) -> None:
        await Wire(stream).request()

    async with (
        raw_server(take_and_hang_up) as port,
        vc.VerificationClient(
            f"http://127.0.0.1:{port}", username=USER, password=PASSWORD, retry=vc.NO_RETRY
        ) as client,
    ):
        with (
            anyio.fail_after(GUARD),
            pytest.raises(
                vc.DeliveryUnknownError,
                match="RemoteProtocolError: Server disconnected without sending a response",
            ),
        ):
            await client.send_confirmation_sms("5551234567", "Pay?")


async def test_a_declared_length_past_the_cap_is_refused_before_the_body_comes() -> None:
    # The peer announces 50 MB and then sends nothing: the call does not wait
    # for a body it would refuse anyway, and says which operation it was.
    async def announce(stream: anyio.abc.SocketStream) -> None:
        if await Wire(stream).request() is not None:
            await stream.send(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: %d\r\n\r\n"
                % (50 * ONE_MB)
            )
            await anyio.sleep_forever()

    async with raw_server(announce) as port, client(port, retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.ResponseTooLargeError) as refused:
            await c.get_mobile_consent_text()
    assert refused.value.operation == "GetMobileConsentText"


async def test_an_answer_whose_head_arrives_in_pieces_is_read_whole() -> None:
    # The head in three writes, a pause after each (the peer's own pace):
    # the body is read only once the whole head is in, gzip and all.
    body = gzip.compress(
        answer(
            "GetMobileConsentText", "<GetMobileConsentTextResult>text</GetMobileConsentTextResult>"
        )
    )
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/xml; charset=utf-8\r\n"
        b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    pieces = [head[:20], head[20:60], head[60:] + body]

    async def slowly(stream: anyio.abc.SocketStream) -> None:
        if await Wire(stream).request() is not None:
            for piece in pieces:
                await stream.send(piece)
                await anyio.sleep(0.05)

    async with raw_server(slowly) as port, client(port, retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD):
            assert await c.get_mobile_consent_text() == "text"


@pytest.mark.parametrize("peer", ["hang-up", "reset", "garbage"])
async def test_attempts_that_fail_leave_no_connection_behind(peer: str) -> None:
    # Each failed attempt ends its connection, and the pool keeps no hold on
    # it: it counts no connection afterwards, and the kernel has none open.
    async def fail(stream: anyio.abc.SocketStream) -> None:
        if await Wire(stream).request() is None:
            return
        if peer == "reset":
            sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif peer == "garbage":
            await stream.send(BROKEN["not-http"])

    request = HTTPRequest(method="GET", path="/", headers=(), body=b"")
    async with raw_server(fail) as port:
        pool = _pool.ConnectionPool(f"http://127.0.0.1:{port}")
        try:
            with anyio.fail_after(GUARD):
                for _ in range(3):
                    with pytest.raises(SendError):
                        await pool.send(
                            request, time_limit=GUARD, max_response_bytes=1000, operation="X"
                        )
                assert pool.open_connections == 0
                await wait_for(lambda: client_sockets_to(port) == 0, "every socket closed")
        finally:
            await pool.aclose()


async def test_a_port_nobody_listens_on_fails_an_sms_as_never_sent() -> None:
    async with raw_server(answering_then_closing(b"")) as port:
        pass  # the port is free again: nobody listens there
    async with client(port, retry=vc.NO_RETRY) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.TransportError) as caught:
            await send_sms(c)
    assert not isinstance(caught.value, vc.DeliveryUnknownError)
    # asyncio's own connect names the refusal; anyio's (trio, and through a proxy) does not.
    assert re.search(
        r": ConnectError: (All connection attempts failed"
        r"|\[Errno 111\] Connect call failed \('127\.0\.0\.1', \d+\)"
        r"|\[Errno 111\] Connection refused)$",
        str(caught.value),
    ), str(caught.value)


@pytest.mark.parametrize("framing", list(FRAMINGS))
@pytest.mark.parametrize("size", [1000, 1001])
async def test_the_pool_caps_a_body_at_the_byte(framing: str, size: int) -> None:
    # The pool itself refuses a body one byte over the cap, however framed,
    # the whole answer read at once or not (the codec's own check comes later).
    body = b"x" * size
    answers = iter([FRAMINGS[framing](b"first"), FRAMINGS[framing](body)])

    async def handle(stream: anyio.abc.SocketStream) -> None:
        wire = Wire(stream)
        while await wire.request() is not None:
            await stream.send(next(answers))

    request = HTTPRequest(method="GET", path="/", headers=(), body=b"")
    async with raw_server(handle) as port:
        pool = _pool.ConnectionPool(f"http://127.0.0.1:{port}")
        try:
            with anyio.fail_after(GUARD):
                first = await pool.send(
                    request, time_limit=GUARD, max_response_bytes=1000, operation="X"
                )
                assert first[2] == b"first"
                if size > 1000:
                    with pytest.raises(vc.ResponseTooLargeError) as refused:
                        await pool.send(
                            request, time_limit=GUARD, max_response_bytes=1000, operation="X"
                        )
                    assert refused.value.operation == "X"
                else:
                    status, _, read = await pool.send(
                        request, time_limit=GUARD, max_response_bytes=1000, operation="X"
                    )
                    assert (status, read) == (200, body)
        finally:
            await pool.aclose()
