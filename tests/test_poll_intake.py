"""A poll run takes its ids from the caller's iterable as it has room, never all up front.

Each test counts how far the iterable was consumed at the moment something
reached the server (the in-process simulator, behind an ASGI wrapper that
looks at the counter when a request arrives). The iterables hold a million
ids and refuse to give more than two per worker before the first request.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio.lowlevel
import httpx
import pytest

import verif_client as vc
from verif_client.simulator import Script, Simulator, SimulatorConfig

NOW = vc.PollPolicy(initial_delay=0, multiplier=1, max_delay=0, jitter=0, timeout=30)
WORKERS = 4


class Taken:
    """Ids handed out by the iterables below, and how many had been at each request."""

    def __init__(self, ahead: int = 2 * WORKERS) -> None:
        self.ahead = ahead
        self.count = 0
        self.at_requests: list[int] = []

    def ids(self, first: int) -> Iterator[int]:
        for request_id in range(first, first + 1_000_000):
            if not self.at_requests and self.count >= self.ahead:
                # A run that takes everything first ends here, not minutes later.
                raise AssertionError(f"{self.count + 1} ids asked for before any request")
            self.count += 1
            yield request_id

    async def async_ids(self, first: int) -> AsyncIterator[int]:
        for request_id in self.ids(first):
            yield request_id


def client_seeing(taken: Taken, simulator: Simulator) -> vc.VerificationClient:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            taken.at_requests.append(taken.count)
        await simulator(scope, receive, send)

    return vc.VerificationClient(
        "http://simulator",
        username="tester",
        password="tester-password",
        transport=httpx.ASGITransport(app=app),
    )


def verifying() -> Simulator:
    # Every id the simulator has never seen is refused at its first poll: FAILED at once.
    return Simulator(config=SimulatorConfig(script=Script(pending_polls=0)))


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["iterable", "async iterable"])
async def test_a_million_ids_are_polled_as_they_are_taken(kind: str) -> None:
    taken = Taken()
    simulator = verifying()
    ids = taken.ids(10**9) if kind == "iterable" else taken.async_ids(10**9)
    outcomes_seen = []
    async with (
        client_seeing(taken, simulator) as client,
        client.poll_verifications(ids, policy=NOW, max_concurrency=WORKERS) as outcomes,
    ):
        async for outcome in outcomes:
            outcomes_seen.append(outcome)
            # Taken and not settled: never more than the workers hold (and,
            # for an async source, about one id per idle worker ahead).
            assert outcomes.waiting <= 2 * WORKERS
            if len(outcomes_seen) == 40:
                break
    # The first request left when no more than one id per worker had been taken.
    assert taken.at_requests[0] <= 2 * WORKERS
    assert len(taken.at_requests) >= 40
    assert {o.status for o in outcomes_seen} == {vc.PollStatus.FAILED}


@pytest.mark.anyio
async def test_ids_waiting_for_their_first_poll_are_taken_only_up_to_the_runs_room() -> None:
    # With a first poll an hour away, nothing is due: only the room stops the intake.
    taken = Taken(ahead=64 * WORKERS)
    later = vc.PollPolicy(initial_delay=3600, jitter=0, timeout=7200)
    async with (
        client_seeing(taken, verifying()) as client,
        client.poll_verifications(
            taken.ids(10**9), policy=later, max_concurrency=WORKERS, keep_open=True
        ) as outcomes,
    ):
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        waiting = outcomes.waiting
    assert waiting == taken.count == 64 * WORKERS
    assert taken.at_requests == []


@pytest.mark.anyio
async def test_ids_before_an_iterable_fails_get_their_outcomes_then_its_error() -> None:
    simulator = verifying()
    async with client_seeing(Taken(), simulator) as client:
        real = [
            (await client.send_confirmation_sms(f"555000000{n}", "Pay?")).request_id
            for n in range(3)
        ]

        def ids() -> Iterator[int]:
            yield from real
            raise ValueError("the id file is truncated")

        seen = []
        raised = []
        # Raised where the outcomes are read, so it leaves the run's task
        # group as any error of the loop's body does: in an ExceptionGroup.
        try:
            async with client.poll_verifications(ids(), policy=NOW, max_concurrency=2) as outcomes:
                async for outcome in outcomes:
                    seen.append(outcome)
        except* ValueError as group:
            raised.extend(group.exceptions)
    assert [str(exc) for exc in raised] == ["the id file is truncated"]
    assert sorted(o.request_id for o in seen) == sorted(real)
    assert {o.status for o in seen} == {vc.PollStatus.VERIFIED}


@pytest.mark.anyio
async def test_an_id_added_while_the_iterable_is_still_being_taken_is_polled_too() -> None:
    taken = Taken()
    simulator = verifying()
    async with client_seeing(taken, simulator) as client:
        (extra,) = [(await client.send_confirmation_sms("5550000009", "Pay?")).request_id]
        seen = set()
        async with client.poll_verifications(
            itertools.islice(taken.ids(10**9), 30), policy=NOW, max_concurrency=2, keep_open=True
        ) as outcomes:
            outcomes.add(extra)
            outcomes.close_input()
            async for outcome in outcomes:
                seen.add(outcome.request_id)
    assert seen == {extra, *range(10**9, 10**9 + 30)}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["iterable", "async iterable"])
async def test_leaving_a_run_while_ids_are_due_raises_nothing(kind: str) -> None:
    # Leaving tears the workers down; a dispatcher woken just before (an id
    # fell due) must not then fail on the workers being gone. It depends on
    # the order the loop runs its tasks in, so the run is left at many points.
    simulator = verifying()
    async with client_seeing(Taken(ahead=10**9), simulator) as client:
        for leave_after in range(1, 80):
            ids = itertools.count(1) if kind == "iterable" else Taken(ahead=10**9).async_ids(1)
            seen = 0
            async with client.poll_verifications(ids, policy=NOW, max_concurrency=3) as outcomes:
                async for _ in outcomes:
                    seen += 1
                    if seen == leave_after:
                        break
            assert seen == leave_after
