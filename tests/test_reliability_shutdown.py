"""Cancellation and shutdown leave nothing behind: no task, no socket.

Sockets are counted from /proc (this process's fds whose TCP peer is the test
server's port); tasks from the event loop itself. The servers run on an event
loop of their own thread, so their tasks are not counted with the client's.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from relsupport import PASSWORD, USER, client_sockets_to, drain, task_count, wait_for

import verif_client as vc
from verif_client.simulator import Script, Simulator, SimulatorConfig, serve_in_thread

pytestmark = pytest.mark.anyio

VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"
FAST_POLLS = vc.PollPolicy(initial_delay=0.001, max_delay=0.005, timeout=600)


@pytest.mark.parametrize("ids", [3000])
async def test_cancelling_a_poll_of_thousands_of_ids(ids: int) -> None:
    simulator = Simulator(config=SimulatorConfig(script=Script.manual()))
    state = simulator._state
    known = [state.send_confirmation_sms("5125550100", "Q?").request_id for _ in range(ids)]
    with serve_in_thread(simulator) as server:
        baseline = task_count()
        client = vc.VerificationClient(server.base_url, username=USER, password=PASSWORD)
        outcomes = 0
        with anyio.fail_after(60):
            with anyio.CancelScope() as scope:
                async with (
                    client.poll_verifications(
                        known, policy=FAST_POLLS, max_concurrency=20
                    ) as stream,
                    anyio.create_task_group() as tg,
                ):

                    async def cancel_when_busy() -> None:
                        # Polling is in full swing: thousands of ids waiting, polls in flight.
                        await wait_for(lambda: len(simulator.calls(VERIFIED)) > 200, "polls")
                        scope.cancel()

                    tg.start_soon(cancel_when_busy)
                    async for _ in stream:
                        outcomes += 1
            assert scope.cancelled_caught
            assert outcomes == 0  # nobody answers: nothing settled
            assert task_count() == baseline
            # Calls cancelled in flight took their connections with them (how many
            # were idle at that moment is timing); the pool itself stays usable,
            # and what it holds idle stays open until it is closed.
            await client.get_mobile_consent_text()
            assert client_sockets_to(server.port) > 0
            await client.aclose()
        assert client_sockets_to(server.port) == 0
        assert task_count() == baseline


class Hang:
    """A peer that reads each request and never answers."""

    def __init__(self) -> None:
        self.waiting = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await drain(receive)
        self.waiting += 1
        await anyio.sleep_forever()


@pytest.mark.parametrize("operation", ["consent-text", "sms"])
async def test_closing_the_client_with_calls_in_flight(operation: str) -> None:
    hang = Hang()
    calls = 25
    with serve_in_thread(hang) as server:
        baseline = task_count()
        client = vc.VerificationClient(
            server.base_url,
            username=USER,
            password=PASSWORD,
            retry=vc.RetryPolicy(attempts=5),
            max_connections=calls,  # every call on the wire at once
        )
        errors: list[BaseException] = []

        async def one() -> None:
            try:
                if operation == "sms":
                    await client.send_confirmation_sms("5125550100", "Is this you?")
                else:
                    await client.get_mobile_consent_text()
            except vc.VerifClientError as exc:
                errors.append(exc)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(calls):
                    tg.start_soon(one)
                await wait_for(lambda: hang.waiting == calls, "every call in flight")
                assert client_sockets_to(server.port) == calls
                await client.aclose()
        # Every call ended with the library's own error (not a RuntimeError of a
        # retry into the closed pool), and an SMS in flight is "delivery unknown".
        assert len(errors) == calls
        expected = vc.DeliveryUnknownError if operation == "sms" else vc.TransportError
        assert all(isinstance(exc, expected) for exc in errors), errors
        assert hang.waiting == calls  # nothing was retried
        assert client_sockets_to(server.port) == 0
        assert task_count() == baseline


async def test_cancelling_single_calls_in_flight_frees_their_sockets() -> None:
    hang = Hang()
    with serve_in_thread(hang) as server:
        baseline = task_count()
        async with vc.VerificationClient(
            server.base_url, username=USER, password=PASSWORD
        ) as client:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    for _ in range(10):
                        tg.start_soon(client.get_mobile_consent_text)
                    await wait_for(lambda: hang.waiting == 10, "every call in flight")
                    tg.cancel_scope.cancel()
            # A request cancelled mid-answer cannot be reused: its connection is gone.
            assert client_sockets_to(server.port) == 0
        assert task_count() == baseline
