"""On asyncio the pool's attempts share one timer for their deadlines (see _deadlines)."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from verif_client._transport._deadlines import Deadlines

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_each_scope_is_cancelled_at_its_own_deadline_and_a_done_one_never() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    start = loop.time()
    ended: dict[str, float] = {}

    async def attempt(name: str, limit: float, finishes_after: float | None) -> None:
        scope = anyio.CancelScope()
        assert deadlines.add(scope, start + limit)
        try:
            with scope:
                await anyio.sleep(3600 if finishes_after is None else finishes_after)
        finally:
            deadlines.discard(scope)
        ended[name] = loop.time() - start if scope.cancelled_caught else -1.0

    async with anyio.create_task_group() as tg:
        tg.start_soon(attempt, "early", 0.05, None)
        tg.start_soon(attempt, "done in time", 0.10, 0.01)
        tg.start_soon(attempt, "late", 0.15, None)
    assert ended["done in time"] == -1.0
    # Never before its deadline, and in deadline order.
    assert 0.05 <= ended["early"] <= ended["late"]
    assert ended["late"] >= 0.15


async def test_a_deadline_before_one_already_kept_is_refused_so_it_gets_its_own() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    assert deadlines.add(anyio.CancelScope(), loop.time() + 30)
    shorter = anyio.CancelScope()
    assert not deadlines.add(shorter, loop.time() + 1)
    # Refused means untouched: it is never cancelled by the shared timer.
    deadlines.discard(shorter)
