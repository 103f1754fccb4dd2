"""A request bigger than the socket buffers, to a peer that reads only when it gets to it.

The pool writes a plain-TCP request with one write(2) and sends what the
kernel did not take through the stream. With the peer's receive buffer shrunk
and a request larger than the most a sending socket may buffer, that first
write is always cut short: the rest must follow, whole and in order, and the
call must get its answer, without anything being taken as sent twice.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.abc
import pytest
from relsupport import PASSWORD, USER, WITH_UVLOOP
from test_transport_bad_peers import GONE, GUARD, Wire, answer, http_response

import verif_client as vc

pytestmark = pytest.mark.anyio

UPDATE = "UpdatePrivateBadCheckRejectReason"
# More than a sending socket may ever buffer here (net.core.wmem_max is 4 MiB
# by default): the kernel cannot take the whole request at once.
REASON_BYTES = 8 * 1024 * 1024


@pytest.fixture(params=WITH_UVLOOP)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


@asynccontextmanager
async def slow_reader(requests: list[bytes]) -> AsyncIterator[int]:
    """A peer with a small receive buffer that answers each whole request; yields its port."""

    async def handle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            with suppress(*GONE):
                wire = Wire(stream)
                while (request := await wire.request()) is not None:
                    requests.append(request)
                    await stream.send(http_response(answer(UPDATE, "true")))

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    raw = listener.extra(anyio.abc.SocketAttribute.raw_socket)
    # Accepted connections inherit it: the window the client may fill stays small.
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        yield listener.extra(anyio.abc.SocketAttribute.local_port)
        tg.cancel_scope.cancel()


async def test_a_request_bigger_than_the_socket_buffers_reaches_a_slow_reader_whole() -> None:
    requests: list[bytes] = []
    reasons = ["a" * REASON_BYTES, "b" * REASON_BYTES]
    async with (
        slow_reader(requests) as port,
        vc.VerificationClient(
            f"http://127.0.0.1:{port}",
            username=USER,
            password=PASSWORD,
            timeout=GUARD,
            retry=vc.NO_RETRY,
        ) as client,
    ):
        with anyio.fail_after(2 * GUARD):
            for number, reason in enumerate(reasons, 1):
                assert await client.update_bad_check_reject_reason(number, reason) is True
    assert len(requests) == 2
    for request, reason in zip(requests, reasons, strict=True):
        head, _, body = request.partition(b"\r\n\r\n")
        assert head.startswith(b"POST /verificationservices/v5/InquiriesWS-5-8.asmx HTTP/1.1\r\n")
        assert body.count(reason.encode()) == 1
        assert body.rstrip().endswith(b"</soap:Envelope>")
