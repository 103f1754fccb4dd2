"""A worker fetches a send activity only when it can send all of its rows at
once (``bulk/_temporal_capacity``): the slots the SDK reserves before it
polls are room for SMS requests, given back row by row.

The SDK's worker runs on asyncio only, and so does this supplier.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

pytest.importorskip("temporalio")

from verif_client.bulk._temporal_capacity import AnswersCapacity, SendCapacity


class _Context:
    """What the SDK hands the supplier (only the permit is read)."""

    def __init__(self, permit: Any = None, slot_info: Any = None) -> None:
        self.permit = permit
        self.slot_info = slot_info


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(body(), timeout=30))


async def reserve(capacity: SendCapacity) -> Any:
    return await capacity.reserve_slot(_Context())  # type: ignore[arg-type]


def start(capacity: SendCapacity, permit: Any, rows: int) -> Any:
    """An activity of ``rows`` rows starts on the slot of ``permit``."""
    capacity.mark_slot_used(_Context(permit, slot_info=object()))  # type: ignore[arg-type]
    return capacity.claim(rows)


def test_the_first_slot_holds_room_for_the_largest_group_then_for_the_jobs() -> None:
    async def body() -> None:
        capacity = SendCapacity(concurrency=50, largest_group=50)
        permit = await reserve(capacity)
        assert capacity.free == 0
        # The job's activities have 25 rows: the rest of the room comes back.
        units = start(capacity, permit, 25)
        assert units.units == 25
        assert capacity.free == 25
        # And the next slot reserves 25, not 50: a second activity runs beside.
        second = await reserve(capacity)
        assert second.units == 25
        assert capacity.free == 0

    run(body)


def test_no_slot_until_an_activitys_worth_of_room_is_back() -> None:
    async def body() -> None:
        capacity = SendCapacity(concurrency=20, largest_group=10)
        first = start(capacity, await reserve(capacity), 10)
        start(capacity, await reserve(capacity), 10)
        waiting = asyncio.ensure_future(reserve(capacity))
        for _ in range(9):
            capacity.give_back(first, 1)  # a row's request ends
            await asyncio.sleep(0)
            assert not waiting.done(), "a slot reserved with room for 9 rows of 10"
        capacity.give_back(first, 1)
        third = await waiting
        assert third.units == 10
        assert capacity.free == 0

    run(body)


def test_rows_without_room_are_not_claimed() -> None:
    async def body() -> None:
        # A worker of --concurrency 10 on a job whose activities have 25 rows.
        capacity = SendCapacity(concurrency=10, largest_group=50)
        permit = await reserve(capacity)
        assert permit.units == 10
        units = start(capacity, permit, 25)
        assert units.units == 10  # the other 15 go back unsent
        assert capacity.free == 0

    run(body)


def test_an_activity_that_ends_gives_back_what_it_still_holds_once() -> None:
    async def body() -> None:
        capacity = SendCapacity(concurrency=30, largest_group=10)
        permit = await reserve(capacity)
        units = start(capacity, permit, 10)
        capacity.give_back(units, 3)
        # The activity ends (its finally), then the SDK releases its slot.
        capacity.give_back(units, units.units)
        capacity.release_slot(_Context(permit, slot_info=object()))  # type: ignore[arg-type]
        assert capacity.free == 30
        capacity.give_back(units, 5)  # nothing is given back twice
        assert capacity.free == 30

    run(body)


def test_a_slot_reserved_but_never_used_gives_its_room_back() -> None:
    async def body() -> None:
        capacity = SendCapacity(concurrency=10, largest_group=10)
        permit = await reserve(capacity)
        capacity.release_slot(_Context(permit))  # type: ignore[arg-type]
        assert capacity.free == 10

    run(body)


def test_no_send_activity_is_taken_eagerly() -> None:
    # Handed over with a workflow task's completion, it could reach a worker
    # that is stopping; fetched by a poll, it waits for room like any other.
    capacity = SendCapacity(concurrency=10, largest_group=10)
    assert capacity.try_reserve_slot(_Context()) is None  # type: ignore[arg-type]
    assert capacity.free == 10


def test_an_activity_that_starts_before_its_slot_is_marked_borrows_what_is_free() -> None:
    async def body() -> None:
        capacity = SendCapacity(concurrency=20, largest_group=10)
        units = capacity.claim(10)  # no slot marked used yet
        assert units.units == 10
        assert capacity.free == 10
        assert capacity.claim(15).units == 10  # room for ten more, no more

    run(body)


def test_a_stopping_worker_fetches_nothing_and_sends_nothing_it_fetched() -> None:
    async def body() -> None:
        capacity = SendCapacity(concurrency=10, largest_group=10)
        capacity.close()
        waiting = asyncio.ensure_future(reserve(capacity))
        await asyncio.sleep(0)
        assert not waiting.done(), "a stopping worker reserved a slot"
        waiting.cancel()  # as the SDK does when it shuts the worker down
        with pytest.raises(asyncio.CancelledError):
            await waiting
        # A task fetched just before: its rows all go back.
        assert capacity.claim(5).units == 0
        assert capacity.free == 10

    run(body)


def test_a_stopping_worker_waits_for_the_tasks_its_polls_bring() -> None:
    async def body() -> None:
        capacity = SendCapacity(concurrency=10, largest_group=5)
        first, second = await reserve(capacity), await reserve(capacity)
        capacity.close()
        settling = asyncio.ensure_future(capacity.settle(patience=60))
        start(capacity, first, 5)  # a poll brings a task: handed back whole
        await asyncio.sleep(0)
        assert not settling.done(), "settled with a poll still under way"
        capacity.release_slot(_Context(second))  # type: ignore[arg-type]
        await settling

    run(body)


def test_a_stopping_worker_waits_no_longer_than_its_patience() -> None:
    async def body() -> None:
        capacity = SendCapacity(concurrency=10, largest_group=10)
        await reserve(capacity)  # its poll never brings anything
        capacity.close()
        await capacity.settle(patience=0)

    run(body)


def test_a_batchs_short_tail_does_not_shrink_the_next_slot() -> None:
    async def body() -> None:
        # A batch of 60 rows in groups of 25: activities of 25, 10 and 25.
        capacity = SendCapacity(concurrency=50, largest_group=50)
        first = start(capacity, await reserve(capacity), 25)
        tail = start(capacity, await reserve(capacity), 10)
        assert (first.units, tail.units, capacity.free) == (25, 10, 15)
        # The next slot holds a group's room, not the tail's: with room for
        # 15 it waits (sized after the tail, it would reserve 10, and the
        # next activity would send 10 of its 25 and hand 15 back).
        waiting = asyncio.ensure_future(reserve(capacity))
        await asyncio.sleep(0)
        assert not waiting.done()
        capacity.give_back(first, 10)  # ten of the first activity's rows end
        third = await waiting
        assert third.units == 25
        assert start(capacity, third, 25).units == 25
        assert capacity.free == 0

    run(body)


def test_a_worker_of_one_job_reserves_the_jobs_group_from_the_start() -> None:
    async def body() -> None:
        # The batch's tail is fetched first: the slots still hold a group each
        # (sized after the tail, the next two would hold 10 each, and the
        # second activity of 25 would find room for 15 and hand 10 back).
        capacity = SendCapacity(concurrency=50, largest_group=50, group=25)
        tail = start(capacity, await reserve(capacity), 10)
        assert (tail.units, capacity.free) == (10, 40)
        assert start(capacity, await reserve(capacity), 25).units == 25
        waiting = asyncio.ensure_future(reserve(capacity))
        await asyncio.sleep(0)
        assert not waiting.done(), "a slot reserved with room for 15 rows of 25"
        capacity.give_back(tail, 10)  # the tail's rows end
        assert start(capacity, await waiting, 25).units == 25
        assert capacity.free == 0

    run(body)


class _Backlog:
    """The polls of the worker that are due and wait, as the test sets them."""

    def __init__(self) -> None:
        self.ids = 0

    def __call__(self) -> int:
        return self.ids


def answers_started(capacity: AnswersCapacity, permit: Any) -> None:
    capacity.mark_slot_used(_Context(permit, slot_info=object()))  # type: ignore[arg-type]


def answers_ended(capacity: AnswersCapacity, permit: Any) -> None:
    capacity.release_slot(_Context(permit, slot_info=object()))  # type: ignore[arg-type]


async def reserve_answers(capacity: AnswersCapacity) -> Any:
    return await capacity.reserve_slot(_Context())  # type: ignore[arg-type]


def test_a_worker_whose_polls_keep_up_fetches_answers_without_bound() -> None:
    async def body() -> None:
        backlog = _Backlog()
        backlog.ids = 99
        capacity = AnswersCapacity(backlog, limit=100)
        for _ in range(1000):
            answers_started(capacity, await reserve_answers(capacity))
        assert capacity.running == 1000

    run(body)


def test_a_worker_whose_polls_fall_behind_fetches_no_more_answers_until_they_catch_up() -> None:
    async def body() -> None:
        backlog = _Backlog()
        capacity = AnswersCapacity(backlog, limit=100)
        answers_started(capacity, await reserve_answers(capacity))
        backlog.ids = 100
        waiting = asyncio.ensure_future(reserve_answers(capacity))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done(), "an answers activity fetched by a worker behind on its polls"
        assert capacity.try_reserve_slot(_Context()) is None  # type: ignore[arg-type]
        backlog.ids = 99  # a poll settled
        answers_started(capacity, await waiting)
        assert capacity.running == 2

    run(body)


def test_a_worker_with_no_answers_activity_fetches_one_however_far_behind() -> None:
    # Every worker of a job held back by its --rate is behind: each still
    # takes answers an activity at a time, so the job goes on.
    async def body() -> None:
        backlog = _Backlog()
        backlog.ids = 10**6
        capacity = AnswersCapacity(backlog, limit=100)
        first = await reserve_answers(capacity)
        assert capacity.try_reserve_slot(_Context()) is not None  # type: ignore[arg-type]
        answers_started(capacity, first)
        waiting = asyncio.ensure_future(reserve_answers(capacity))
        await asyncio.sleep(0)
        assert not waiting.done()
        answers_ended(capacity, first)
        answers_started(capacity, await waiting)
        assert capacity.running == 1

    run(body)


def test_a_slot_reserved_and_never_used_is_no_answers_activity() -> None:
    async def body() -> None:
        capacity = AnswersCapacity(_Backlog(), limit=100)
        unused = await reserve_answers(capacity)
        capacity.release_slot(_Context(unused, slot_info=None))  # type: ignore[arg-type]
        assert capacity.running == 0

    run(body)
