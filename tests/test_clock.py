"""The clock the client and the pool read is the running loop's own.

Timers are armed with the loop's ``call_at``, so a deadline read from any
other clock would fire early or late. asyncio's own clock is read as
``time.monotonic`` directly (the loop's ``time()`` is that, behind a Python
frame); a loop with a clock of its own is read through its method.
"""

from __future__ import annotations

import asyncio
import time

import anyio
import pytest

from verif_client._clock import loop_clock


@pytest.mark.anyio
async def test_the_clock_reads_what_the_loop_reads() -> None:
    clock = loop_clock()
    before = anyio.current_time()
    reading = clock()
    after = anyio.current_time()
    assert before <= reading <= after


class _ShiftedLoop(asyncio.SelectorEventLoop):
    def time(self) -> float:
        return time.monotonic() + 1000.0


def test_a_loop_with_a_clock_of_its_own_is_read_through_it() -> None:
    async def read() -> tuple[float, float, float]:
        clock = loop_clock()
        loop = asyncio.get_running_loop()
        return loop.time(), clock(), loop.time()

    with asyncio.Runner(loop_factory=_ShiftedLoop) as runner:
        before, reading, after = runner.run(read())
    assert before <= reading <= after
