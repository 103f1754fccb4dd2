"""The connection slots: taken at once while free, waited for in turn, none
lost to a cancelled wait (asyncio and trio)."""

from __future__ import annotations

import anyio
import pytest

from verif_client._slots import Slots

pytestmark = pytest.mark.anyio


async def test_a_free_slot_is_taken_at_once_and_none_past_the_count() -> None:
    slots = Slots(2)
    assert slots.take_now()
    assert slots.take_now()
    assert not slots.take_now()
    assert slots.free == 0
    slots.release()
    assert slots.free == 1
    assert slots.take_now()


async def test_waiters_get_slots_in_turn_and_a_slot_freed_meanwhile_is_theirs() -> None:
    slots = Slots(1)
    assert slots.take_now()
    order: list[int] = []

    async def wait(n: int) -> None:
        await slots.take()
        order.append(n)

    async with anyio.create_task_group() as tg:
        for n in range(3):
            tg.start_soon(wait, n)
            await anyio.sleep(0.01)  # queued in this order
        assert len(slots.waiting) == 3
        slots.release()
        # Handed to the first waiter, not to the free count: a call that
        # finds no slot free cannot pass those that wait.
        assert slots.free == 0
        assert not slots.take_now()
        await anyio.sleep(0.01)
        slots.release()
        await anyio.sleep(0.01)
        slots.release()
    assert order == [0, 1, 2]
    slots.release()
    assert slots.free == 1
    assert not slots.waiting


async def test_a_wait_cancelled_before_its_turn_leaves_the_queue() -> None:
    slots = Slots(1)
    assert slots.take_now()

    async def wait() -> None:
        await slots.take()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        await anyio.sleep(0.01)
        assert len(slots.waiting) == 1
        tg.cancel_scope.cancel()
    assert not slots.waiting
    slots.release()
    assert slots.free == 1


async def test_a_wait_cancelled_as_its_slot_came_loses_no_slot() -> None:
    slots = Slots(1)
    assert slots.take_now()
    got: list[str] = []

    async def wait(name: str, scope: anyio.CancelScope) -> None:
        with scope:
            await slots.take()
            got.append(name)
            slots.release()

    first, second = anyio.CancelScope(), anyio.CancelScope()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait, "first", first)
            await anyio.sleep(0.01)
            tg.start_soon(wait, "second", second)
            await anyio.sleep(0.01)
            # The slot is handed to the first waiter, cancelled before it runs
            # again: it either takes the slot (its wait was over, as anyio
            # has it on asyncio) or passes it on; either way the second gets one.
            slots.release()
            first.cancel()
    assert got[-1:] == ["second"]
    assert slots.free == 1
    assert not slots.waiting
