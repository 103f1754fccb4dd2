"""A poll run's consumer is cancelled as anyio promises, outcomes waiting or not.

Taking an outcome that already waits skips the await on the event loop, and
on asyncio even the cancellation check's own coroutine when no cancel scope
around the consumer was cancelled (``_clock.cancel_pending``). These tests
hold that shortcut to what ``anyio.lowlevel.checkpoint_if_cancelled`` does:
a cancelled scope, or one outside it up to the first shield, cancels the
next step; a shield keeps it going.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import sniffio
from relsupport import WITH_UVLOOP, wait_for
from test_poll_at_once import NOW, TRUE, serving

import verif_client as vc
from verif_client._clock import cancel_pending

pytestmark = pytest.mark.anyio

IDS = [2**33 + n for n in range(5)]


async def test_the_check_sees_what_anyio_would_cancel() -> None:
    pending = cancel_pending()
    on_asyncio = sniffio.current_async_library() == "asyncio"
    # On trio the check is always made (the answer is always True).
    assert pending() is not on_asyncio
    with anyio.CancelScope() as outer:
        assert pending() is not on_asyncio
        outer.cancel()
        assert pending() is True
        with anyio.CancelScope():
            assert pending() is True  # an outer scope's cancel reaches in
            with anyio.CancelScope(shield=True):
                assert pending() is not on_asyncio  # a shield stops it
                with anyio.CancelScope() as inner:
                    assert pending() is not on_asyncio
                    inner.cancel()
                    assert pending() is True
                    await anyio.lowlevel.checkpoint()
                assert inner.cancelled_caught
        await anyio.lowlevel.checkpoint()
    assert outer.cancelled_caught


async def test_the_check_follows_the_task_it_is_asked_from() -> None:
    pending = cancel_pending()
    on_asyncio = sniffio.current_async_library() == "asyncio"
    seen: list[bool] = []

    async def cancelled_child() -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()
            seen.append(pending())
            await anyio.lowlevel.checkpoint()

    with anyio.CancelScope():
        # Asked from this task first, then from a child whose scope is cancelled.
        assert pending() is not on_asyncio
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancelled_child)
        assert seen == [True]
        # The child's cancelled scope is not this task's.
        assert pending() is not on_asyncio


async def _with_outcomes_waiting(outcomes: Any, count: int) -> None:
    queue = outcomes._queue
    await wait_for(lambda: len(queue) == count, f"{count} outcomes waiting")


@pytest.mark.parametrize("anyio_backend", WITH_UVLOOP)
async def test_a_cancelled_consumer_stops_with_outcomes_waiting() -> None:
    async with (
        serving([TRUE]) as (_, port),
        vc.VerificationClient(f"http://127.0.0.1:{port}") as client,
        client.poll_verifications(IDS, policy=NOW) as stream,
    ):
        outcomes = aiter(stream)
        taken = [await anext(outcomes)]
        await _with_outcomes_waiting(outcomes, len(IDS) - 1)
        with anyio.CancelScope() as scope:
            scope.cancel()
            taken.append(await anext(outcomes))
        assert scope.cancelled_caught
        assert len(taken) == 1
        # Cancelled from a scope outside the consumer's own.
        with anyio.CancelScope() as outer:
            outer.cancel()
            with anyio.CancelScope():
                taken.append(await anext(outcomes))
        assert outer.cancelled_caught
        assert len(taken) == 1
        # A shield inside a cancelled scope keeps the consumer going.
        with anyio.CancelScope() as outer:
            outer.cancel()
            with anyio.CancelScope(shield=True):
                taken.append(await anext(outcomes))
            assert not outer.cancelled_caught
            await anyio.lowlevel.checkpoint()
        assert outer.cancelled_caught
        assert len(taken) == 2
        # Nothing was lost: the rest are still there.
        taken += [outcome async for outcome in outcomes]
    assert sorted(outcome.request_id for outcome in taken) == IDS
    assert {outcome.status for outcome in taken} == {vc.PollStatus.VERIFIED}


async def test_the_check_in_a_task_anyio_never_saw() -> None:
    if sniffio.current_async_library() != "asyncio":
        pytest.skip("tasks started by asyncio itself")
    import asyncio

    pending = cancel_pending()
    # A task of asyncio's own, never in an anyio cancel scope: nothing of
    # anyio's can cancel it.
    assert await asyncio.get_running_loop().create_task(_ask(pending)) is False


async def _ask(pending: Any) -> bool:
    answer: bool = pending()
    return answer


async def test_the_check_outside_any_task() -> None:
    if sniffio.current_async_library() != "asyncio":
        pytest.skip("asyncio runs callbacks outside tasks")
    import asyncio

    pending = cancel_pending()
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[bool] = loop.create_future()
    # From one of the loop's callbacks there is no task: anyio's check returns
    # at once, and so must this, first asked there or after a task was seen.
    loop.call_soon(lambda: answered.set_result(pending()))
    assert await answered is False
    with anyio.CancelScope() as scope:
        scope.cancel()
        assert pending() is True
        seen: asyncio.Future[bool] = loop.create_future()
        loop.call_soon(lambda: seen.set_result(pending()))
        await asyncio.shield(seen)
    assert seen.result() is False
