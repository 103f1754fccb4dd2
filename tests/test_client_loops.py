"""One client used from one event loop after another.

A module-level client, or ``asyncio.run`` called twice, leaves the first
loop's connections in the pool when that loop ends. The second loop must never
write on one of them (the request would leave on a dead loop's socket, be
delivered, and the caller get "Event loop is closed"): it opens its own, and
each SMS reaches the server exactly once.
"""

from __future__ import annotations

import asyncio
import socketserver
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pytest
import trio
from test_transport_bad_peers import SMS_SENT

import verif_client as vc

T = TypeVar("T")


class _Counting(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Answering)
        self.lock = threading.Lock()
        self.connections = 0
        self.requests = 0
        # Requests past this many are read and never answered.
        self.answered_at_most = 1 << 30


class _Answering(socketserver.BaseRequestHandler):
    """Answers every request on a keep-alive connection with SMS_SENT."""

    server: _Counting

    def handle(self) -> None:
        with self.server.lock:
            self.server.connections += 1
        buffer = b""
        while True:
            while b"\r\n\r\n" not in buffer:
                data = self.request.recv(65536)
                if not data:
                    return
                buffer += data
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(buffer) < length:
                data = self.request.recv(65536)
                if not data:
                    return
                buffer += data
            buffer = buffer[length:]
            with self.server.lock:
                self.server.requests += 1
                answer = self.server.requests <= self.server.answered_at_most
            if answer:
                self.request.sendall(SMS_SENT)


@pytest.fixture
def server() -> Iterator[_Counting]:
    with _Counting() as counting:
        thread = threading.Thread(target=counting.serve_forever, daemon=True)
        thread.start()
        yield counting
        counting.shutdown()


async def _send(client: vc.VerificationClient) -> vc.RequestResult:
    return await client.send_confirmation_sms("5125550100", "Is this you?")


@pytest.mark.parametrize("runner", ["asyncio", "trio"])
def test_a_second_event_loop_never_writes_on_the_first_ones_connections(
    server: _Counting, runner: str
) -> None:
    client = vc.VerificationClient(
        f"http://127.0.0.1:{server.server_address[1]}", username="u", password="Loop-Pa55-word"
    )

    def run(function: Callable[..., Awaitable[T]], *args: object) -> T:
        if runner == "asyncio":
            return asyncio.run(function(*args))  # type: ignore[arg-type]
        return trio.run(function, *args)

    first = run(_send, client)
    # The first loop is gone; its connection is still open on the server's side.
    second = run(_send, client)
    third = run(_send, client)
    assert first.request_id == second.request_id == third.request_id == 7
    assert server.requests == 3, "each SMS went out exactly once"
    # Each loop opened its own connection: none was reused from a dead loop.
    assert server.connections == 3
    run(client.aclose)


def test_a_client_closed_from_another_loop_closes_without_touching_the_dead_one(
    server: _Counting,
) -> None:
    client = vc.VerificationClient(f"http://127.0.0.1:{server.server_address[1]}")
    asyncio.run(_send(client))
    asyncio.run(client.aclose())
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(_send(client))
    assert server.requests == 1


def test_a_second_event_loop_cuts_its_attempts_at_their_own_deadlines(server: _Counting) -> None:
    # On asyncio the attempts' deadlines share a timer bound to the loop: the
    # second loop's must run on the second loop, or nothing ever cuts a call
    # the server leaves unanswered there.
    server.answered_at_most = 1
    client = vc.VerificationClient(
        f"http://127.0.0.1:{server.server_address[1]}",
        username="u",
        password="Loop-Pa55-word",
        timeout=0.5,
        retry=vc.NO_RETRY,
    )
    assert asyncio.run(_send(client)).request_id == 7
    with pytest.raises(vc.DeliveryUnknownError) as caught:
        asyncio.run(asyncio.wait_for(_send(client), 15))
    assert "Timeout: no complete answer within 0.5 s" in str(caught.value)
    asyncio.run(client.aclose())
    assert server.requests == 2
