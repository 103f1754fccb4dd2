"""The retry and poll policies' arithmetic and the defaults the README promises.

The random draws go through the ``rng`` argument: a generator pinned to the top
or the bottom of its range shows the ceiling and the floor of each wait.
"""

from __future__ import annotations

import math
import random

import pytest

import verif_client as vc
from verif_client._pollpolicy import POLL_RETRY, VerifiedDialect
from verif_client._retry import RETRYABLE_STATUSES, grown


class Pinned(random.Random):
    """A generator whose every draw is ``value``: 1.0 gives the top of a range, 0.0 its bottom."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


TOP, BOTTOM = Pinned(1.0), Pinned(0.0)


def test_the_documented_defaults() -> None:
    # README: 4 attempts, backoff 0.25 s x2 up to 4 s with full jitter, 30 s per call;
    # reads are retried on HTTP 429/502/503/504.
    assert vc.RetryPolicy() == vc.RetryPolicy(
        attempts=4, initial_backoff=0.25, multiplier=2.0, max_backoff=4.0, deadline=30.0
    )
    assert vc.RetryPolicy().statuses == RETRYABLE_STATUSES == {429, 502, 503, 504}
    assert vc.NO_RETRY.attempts == 1
    # README: 1 s, x1.5, at most 15 s, jitter 0.5, 10 min; retry 3 attempts, 0.5 s up to 2 s.
    assert vc.PollPolicy() == vc.PollPolicy(
        initial_delay=1.0, multiplier=1.5, max_delay=15.0, jitter=0.5, timeout=600.0
    )
    assert vc.PollPolicy().false_means == "auto"
    assert (POLL_RETRY.attempts, POLL_RETRY.initial_backoff, POLL_RETRY.max_backoff) == (3, 0.5, 2)
    assert POLL_RETRY.deadline == 15.0
    assert vc.PollPolicy().retry is POLL_RETRY


def test_growth_is_exponential_and_ends_at_infinity_not_an_overflow() -> None:
    assert grown(0.25, 2.0, 0) == 0.25
    assert grown(0.25, 2.0, 3) == 2.0
    assert grown(3.0, 1.0, 50) == 3.0
    assert grown(0.0, 10.0, 10_000) == 0.0
    assert grown(1.0, 2.0, 10_000) == math.inf


def test_each_backoff_is_drawn_up_to_a_ceiling_that_doubles_and_is_capped() -> None:
    policy = vc.RetryPolicy()

    ceilings = [policy.backoff(attempt, TOP) for attempt in range(1, 8)]

    assert ceilings == pytest.approx([0.25, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0])
    assert [policy.backoff(attempt, BOTTOM) for attempt in (1, 5)] == [0.0, 0.0]
    assert policy.backoff(10_000, TOP) == 4.0


def test_backoff_without_a_generator_stays_within_its_ceiling() -> None:
    policy = vc.RetryPolicy(initial_backoff=1.0, max_backoff=1.5)
    draws = [policy.backoff(2) for _ in range(200)]
    assert all(0.0 <= draw <= 1.5 for draw in draws)
    assert len(set(draws)) > 1


def test_each_poll_delay_grows_is_capped_and_is_shortened_by_at_most_the_jitter() -> None:
    policy = vc.PollPolicy(initial_delay=2.0, multiplier=3.0, max_delay=50.0, jitter=0.25)

    longest = [policy.delay(number, BOTTOM) for number in range(1, 6)]
    shortest = [policy.delay(number, TOP) for number in range(1, 6)]

    assert longest == pytest.approx([2.0, 6.0, 18.0, 50.0, 50.0])
    assert shortest == pytest.approx([1.5, 4.5, 13.5, 37.5, 37.5])
    assert vc.PollPolicy(jitter=0).delay(1, TOP) == 1.0
    assert vc.PollPolicy(max_delay=15).delay(10_000, BOTTOM) == 15.0


def test_poll_delays_without_a_generator_stay_within_the_jitter() -> None:
    policy = vc.PollPolicy(initial_delay=4.0, multiplier=1.0, jitter=0.5)
    delays = [policy.delay(1) for _ in range(200)]
    assert all(2.0 <= delay <= 4.0 for delay in delays)
    assert len(set(delays)) > 1


def test_a_dialect_learns_only_from_a_nil() -> None:
    dialect = VerifiedDialect()
    dialect.learn(vc.VerificationResult(verified=False))
    dialect.learn(vc.VerificationResult(verified=True, error_message="x"))
    assert dialect.nil_seen is False
    dialect.learn(vc.VerificationResult(verified=None, error_message="not yet"))
    assert dialect.nil_seen is True
    dialect.learn(vc.VerificationResult(verified=False))
    assert dialect.nil_seen is True


@pytest.mark.parametrize("status", [s for s in vc.PollStatus])
def test_poll_statuses_are_named_as_the_output_writes_them(status: vc.PollStatus) -> None:
    assert status.value == status.name.lower()
