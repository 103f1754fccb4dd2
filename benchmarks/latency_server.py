"""A near remote service: a minimal asyncio Protocol server in its own process.

``python -m benchmarks.latency_server DELAY_MS CPU [LOOP]`` answers every request
(any path but one) with the same canned SOAP 1.1 HasBeenVerified ``true``
after DELAY_MS milliseconds, prints its port as one JSON line and serves until stdin
closes. It does as little as a server can (find the end of each request, one
timer, one write), so the client's cost is what the benchmark sees. Pinned to
CPU ``CPU`` (when the machine has it), away from the client; on uvloop when
LOOP is ``uvloop``, so that a client's thousands of requests per second are
not held back by the server.

``GET /first-request`` answers at once with the ``time.monotonic()`` (one clock
for every process of the machine) at which the first request since the last
such question arrived whole, or ``null``: when a client's first request left,
seen from outside the client.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from contextlib import AbstractContextManager
from typing import Any, Final, cast
from urllib.parse import urlsplit

from verif_client import Binding, VerificationResult

from . import workload
from .common import server_process


def canned_response() -> bytes:
    body = workload.response_body(workload.VERIFIED_OP, Binding.SOAP11, VerificationResult(True))
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/xml; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s"
        % (len(body), body)
    )


_FIRST_REQUEST: Final = b"get /first-request "
# When the first request since the last /first-request question arrived.
_first_arrival: list[float | None] = [None]


class _Answering(asyncio.Protocol):
    def __init__(self, response: bytes, delay: float) -> None:
        self.response = response
        self.delay = delay
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports have asyncio's methods without its base class.
        self.transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        loop = asyncio.get_running_loop()
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            length = 0
            at = head.find(b"content-length:")
            if at >= 0:
                length = int(head[at + 15 :].split(b"\r\n", 1)[0])
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            if head.startswith(_FIRST_REQUEST):
                self._tell_first_arrival()
                continue
            if _first_arrival[0] is None:
                _first_arrival[0] = time.monotonic()
            loop.call_later(self.delay, self.reply)

    def _tell_first_arrival(self) -> None:
        body = json.dumps(_first_arrival[0]).encode()
        _first_arrival[0] = None
        if self.transport is not None:
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                % (len(body), body)
            )
            self.transport.close()

    def reply(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(self.response)


async def _main(delay: float) -> None:
    loop = asyncio.get_running_loop()
    response = canned_response()
    server = await loop.create_server(
        lambda: _Answering(response, delay), "127.0.0.1", 0, backlog=4096
    )
    port = server.sockets[0].getsockname()[1]
    print(json.dumps({"base_url": f"http://127.0.0.1:{port}"}), flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    server.close()


def first_arrival(base_url: str) -> float | None:
    """When the first request since the last call arrived (``time.monotonic()``),
    or None; from then on, the next request is the first."""
    host, port = urlsplit(base_url).netloc.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as peer:
        peer.sendall(b"GET /first-request HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while chunk := peer.recv(4096):
            answer += chunk
    value = json.loads(answer.partition(b"\r\n\r\n")[2])
    return None if value is None else float(value)


def pin(cpu: int) -> bool:
    """Run this process on one CPU only, if the machine has it."""
    available = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if len(available) < 2 or cpu not in available:
        return False
    os.sched_setaffinity(0, {cpu})
    return True


def running(
    delay_ms: float, cpu: int = 0, loop: str = "asyncio"
) -> AbstractContextManager[dict[str, Any]]:
    """Start the server process; yield what it printed (``base_url``); stop it on exit."""
    return server_process("benchmarks.latency_server", str(delay_ms), str(cpu), loop)


if __name__ == "__main__":
    pin(int(sys.argv[2]))
    if sys.argv[3:] == ["uvloop"]:
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(_main(float(sys.argv[1]) / 1000))
    else:
        asyncio.run(_main(float(sys.argv[1]) / 1000))
