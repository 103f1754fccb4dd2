"""The rate limit really spaces the requests a peer receives: measured on trio's
autojump clock, where every wait is exact and the test runs instantly."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
import trio.testing

import verif_client as vc
from verif_client._ratelimit import RateLimiter, gcra_parameters
from verif_client.simulator import Simulator

CONSENT = "GetMobileConsentText"


def arrivals_at_the_peer(calls: int, *, concurrent: bool = False, **options: Any) -> list[float]:
    """When each of ``calls`` requests reached the service, in seconds from the first call."""
    simulator = Simulator()
    seen: list[float] = []

    async def timed(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(anyio.current_time())
        await simulator(scope, receive, send)

    async def main() -> float:
        transport = httpx.ASGITransport(app=timed)
        async with vc.VerificationClient(
            "http://sim", username="user", password="pass", transport=transport, **options
        ) as client:
            started = anyio.current_time()
            if concurrent:
                async with anyio.create_task_group() as tg:
                    for _ in range(calls):
                        tg.start_soon(client.get_mobile_consent_text)
            else:
                for _ in range(calls):
                    await client.get_mobile_consent_text()
            return started

    clock = trio.testing.MockClock(autojump_threshold=0)
    started = anyio.run(main, backend="trio", backend_options={"clock": clock})
    assert len(seen) == calls
    return [at - started for at in seen]


@pytest.mark.parametrize("concurrent", [False, True], ids=["one-by-one", "all-at-once"])
def test_requests_reach_the_peer_no_faster_than_the_rate(concurrent: bool) -> None:
    arrivals = arrivals_at_the_peer(6, concurrent=concurrent, rate_limit=2.0)

    assert arrivals == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0, 2.5])


def test_without_a_limit_nothing_waits() -> None:
    assert arrivals_at_the_peer(4) == pytest.approx([0.0] * 4)


def test_a_burst_goes_at_once_and_the_rest_at_the_rate() -> None:
    limiter = RateLimiter(2.0, burst=3)

    arrivals = arrivals_at_the_peer(6, concurrent=True, rate_limiter=limiter)

    assert arrivals == pytest.approx([0.0, 0.0, 0.0, 0.5, 1.0, 1.5])


def test_a_quiet_spell_earns_no_more_than_the_burst() -> None:
    now = [100.0]
    limiter = RateLimiter(4.0, burst=2, clock=lambda: now[0])

    assert [limiter.reserve() for _ in range(3)] == [0.0, 0.0, 0.25]
    now[0] += 60.0  # a minute of nothing: still only two at once
    assert [limiter.reserve() for _ in range(3)] == [0.0, 0.0, 0.25]


def test_a_late_caller_waits_only_for_what_is_left_of_its_slot() -> None:
    now = [0.0]
    limiter = RateLimiter(1.0, clock=lambda: now[0])

    assert limiter.reserve() == 0.0
    now[0] = 0.75
    assert limiter.reserve() == pytest.approx(0.25)
    now[0] = 5.0
    assert limiter.reserve() == 0.0


@pytest.mark.parametrize(
    ("rate", "burst", "problem"),
    [
        (0.0, 1, "rate must be > 0, got 0.0"),
        (-1.0, 1, "rate must be > 0, got -1.0"),
        (1.0, 0, "burst must be >= 1, got 0"),
    ],
)
def test_a_limit_that_could_never_let_anything_through_is_refused(
    rate: float, burst: int, problem: str
) -> None:
    with pytest.raises(ValueError, match=f"^{problem}$"):
        RateLimiter(rate, burst=burst)


def test_the_parameters_and_the_repr_say_what_was_asked() -> None:
    assert gcra_parameters(4.0, 3) == (0.25, 0.5)
    assert repr(RateLimiter(2.5, burst=4)) == "RateLimiter(rate=2.5, burst=4)"
    limiter = RateLimiter(2.5, burst=4)
    assert (limiter.rate, limiter.burst) == (2.5, 4)
