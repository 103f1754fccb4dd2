"""A poll run ends at its deadline, whatever the service keeps saying.

Run on trio's autojump clock: the ten minutes of the default policy pass
instantly, and a run that let its deadline slip fails at once on the
virtual ``fail_after`` below instead of spinning until the per-test timeout.
"""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import httpx
import pytest
import trio.testing

import verif_client as vc
from verif_client.simulator import Script, Simulator, SimulatorConfig

VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"
# The policies here ask at most a few dozen times; a run past its deadline can
# also spin without the clock moving, which only this bound ends quickly.
MAX_POLLS = 1000


def poll_never_answered(policy: vc.PollPolicy) -> tuple[list[float], float, vc.VerificationOutcome]:
    """Poll one id the service never settles: the polls' times and the outcome's,
    in seconds from the run's start."""
    simulator = Simulator(config=SimulatorConfig(script=Script(answer="never")))
    polls: list[float] = []

    async def timed(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and VERIFIED in scope["path"]:
            polls.append(anyio.current_time())
            if len(polls) > MAX_POLLS:
                raise RuntimeError(f"still polling after {MAX_POLLS} polls")
        await simulator(scope, receive, send)

    async def main() -> tuple[float, float, vc.VerificationOutcome]:
        transport = httpx.ASGITransport(app=timed)
        async with vc.VerificationClient(
            "http://sim", transport=transport, binding="http-get"
        ) as client:
            sent = await client.send_confirmation_sms("5551234567", "Did you ask to pay?")
            started = anyio.current_time()
            with anyio.fail_after(policy.timeout + 60):
                outcome = await client.wait_until_verified(sent.request_id, policy=policy)
            return started, anyio.current_time(), outcome

    clock = trio.testing.MockClock(autojump_threshold=0)
    started, ended, outcome = anyio.run(main, backend="trio", backend_options={"clock": clock})
    return [at - started for at in polls], ended - started, outcome


@pytest.mark.parametrize(
    "policy",
    [
        vc.PollPolicy(),
        vc.PollPolicy(initial_delay=7, multiplier=1, max_delay=7, jitter=0, timeout=30),
    ],
    ids=["default", "steps-past-the-deadline"],
)
def test_a_request_never_answered_ends_timed_out_at_the_deadline(policy: vc.PollPolicy) -> None:
    polls, ended, outcome = poll_never_answered(policy)

    assert outcome.status is vc.PollStatus.TIMED_OUT
    assert outcome.attempts == len(polls) > 1
    # The last poll is moved onto the deadline, and nothing is asked after it.
    assert polls[-1] == pytest.approx(policy.timeout)
    assert all(earlier < later for earlier, later in itertools.pairwise(polls))
    assert ended == pytest.approx(policy.timeout)


def test_the_steps_between_polls_follow_the_policy_up_to_the_deadline() -> None:
    policy = vc.PollPolicy(initial_delay=7, multiplier=1, max_delay=7, jitter=0, timeout=30)

    polls, _, _ = poll_never_answered(policy)

    assert polls == pytest.approx([7, 14, 21, 28, 30])
