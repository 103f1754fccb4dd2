"""The call's deadline and the poll's timeout hold against a peer that never answers.

README: every attempt, the first included, ends by ``RetryPolicy.deadline``;
a poll still in flight at ``PollPolicy.timeout`` is cut and the id ends
``TIMED_OUT``. The peer here reads each request and never answers; the
client's own ``timeout`` is ten minutes, so only the promise under test can end
the call within the guard.
"""

from __future__ import annotations

import anyio
import pytest
from test_transport_bad_peers import Wire, raw_server

import verif_client as vc

pytestmark = pytest.mark.anyio

NEVER = 600.0  # the client's per-attempt timeout: far past the guard
GUARD = 60.0


async def silent(stream: anyio.abc.SocketStream) -> None:
    wire = Wire(stream)
    while await wire.request() is not None:
        pass  # read, never answered


def client(port: int) -> vc.VerificationClient:
    return vc.VerificationClient(
        f"http://127.0.0.1:{port}", username="u", password="Deadline-Pa55", timeout=NEVER
    )


@pytest.mark.parametrize("operation", ["read", "sms"])
async def test_the_first_attempt_ends_by_the_calls_deadline(operation: str) -> None:
    policy = vc.RetryPolicy(attempts=1, deadline=0.5)
    async with raw_server(silent) as port, client(port) as c:
        with anyio.fail_after(GUARD):
            if operation == "read":
                with pytest.raises(vc.TransportError, match="Timeout"):
                    await c.call_with(vc.HAS_BEEN_VERIFIED, {"RequestId": 5}, retry=policy)
            else:
                with pytest.raises(vc.DeliveryUnknownError):
                    await c.call_with(
                        vc.SEND_CONFIRMATION_SMS,
                        {"PhoneNumber": "5125550100", "ConfirmationQuestion": "You?"},
                        retry=policy,
                    )


async def test_a_poll_in_flight_is_cut_at_the_poll_timeout() -> None:
    # The retry policy would keep one poll going for a minute: the poll's
    # timeout, 0.5 s, must end it first.
    retry = vc.RetryPolicy(attempts=1, deadline=NEVER)
    policy = vc.PollPolicy(initial_delay=0, timeout=0.5, retry=retry)
    async with raw_server(silent) as port, client(port) as c:
        with anyio.fail_after(GUARD):
            outcome = await c.wait_until_verified(4294967297, policy=policy)
    assert outcome.status is vc.PollStatus.TIMED_OUT
    assert outcome.error is None
