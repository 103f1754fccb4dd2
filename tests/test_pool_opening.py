"""The pool opens connections in turns, not all at once.

A thousand calls that each open a connection at the same moment would make
one event-loop pass of a third of a second, and the first answers would wait
behind it; a service would see a thousand handshakes at once. The pool opens
at most 32 at a time: here a server of the test's own takes TCP connections
and never answers the TLS handshake, so every connection being opened stays
being opened, and the test counts them.
"""

from __future__ import annotations

import anyio
import anyio.abc
import pytest
from relsupport import PASSWORD, USER, WITH_UVLOOP, client_sockets_to, wait_for

import verif_client as vc

pytestmark = pytest.mark.anyio

AT_ONCE = 32
CALLS = 100
ONE_ATTEMPT = vc.RetryPolicy(attempts=1)
GUARD = 30


@pytest.fixture(params=WITH_UVLOOP)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


async def test_connections_are_opened_32_at_a_time_and_every_call_gets_its_turn() -> None:
    held: list[anyio.abc.SocketStream] = []
    release = anyio.Event()

    async def never_shake_hands(stream: anyio.abc.SocketStream) -> None:
        held.append(stream)
        await release.wait()
        await stream.aclose()  # the handshake ends there: that call fails at once

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    failures: list[vc.VerifClientError] = []

    async def call(client: vc.VerificationClient, request_id: int) -> None:
        try:
            await client.call_with(
                vc.HAS_BEEN_VERIFIED, {"RequestId": request_id}, retry=ONE_ATTEMPT
            )
        except vc.VerifClientError as exc:
            failures.append(exc)

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as server:
            server.start_soon(listener.serve, never_shake_hands)
            async with (
                vc.VerificationClient(
                    f"https://127.0.0.1:{port}",
                    username=USER,
                    password=PASSWORD,
                    max_connections=CALLS,
                    timeout=GUARD,
                ) as client,
                anyio.create_task_group() as calls,
            ):
                for request_id in range(1, CALLS + 1):
                    calls.start_soon(call, client, request_id)
                await wait_for(lambda: len(held) >= AT_ONCE, "the first turn connected")
                # Every call has started by now (they start together); only a
                # turn's worth has a socket, the others wait for theirs.
                assert client_sockets_to(port) == AT_ONCE
                assert len(held) == AT_ONCE
                # Each turn's handshakes end in a close: the next turn opens.
                release.set()
            server.cancel_scope.cancel()

    assert len(failures) == CALLS
    assert len(held) == CALLS
    assert all(isinstance(exc, vc.TransportError) for exc in failures)
    assert all("ConnectError" in str(exc) for exc in failures)
