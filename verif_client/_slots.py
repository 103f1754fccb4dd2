"""A client's connection slots: a count of free ones, and the calls waiting in turn.

What anyio's Semaphore did for the slots, with the free count in the open: a
poll at once takes a free slot and gives it back with a test and a
subtraction written where it happens (see _atonce), where the semaphore
cost a method call each way, twice per poll.

Waiting is first come, first served: a slot given back while calls wait
goes to the first of them, never to the free count, so a call that finds a
slot free never passes one that waits. A wait cancelled after its slot was
handed to it passes the slot on, so none is lost.
"""

from __future__ import annotations

from collections import deque

import anyio


class Slots:
    """``count`` connection slots, on the event loop that made them."""

    __slots__ = ("free", "waiting")

    def __init__(self, count: int) -> None:
        # Slots free now; never above 0 while ``waiting`` has anyone in it.
        self.free = count
        self.waiting: deque[anyio.Event] = deque()

    def take_now(self) -> bool:
        """Take a slot if one is free; False (and none taken) if not."""
        if self.free > 0:
            self.free -= 1
            return True
        return False

    async def take(self) -> None:
        """Wait for a slot, after those already waiting (call take_now first:
        this always waits its turn)."""
        if not self.waiting and self.take_now():
            return  # freed since: no turn to wait for
        turn = anyio.Event()
        self.waiting.append(turn)
        try:
            await turn.wait()
        except BaseException:
            if turn.is_set():
                self.release()  # handed over as the wait was cancelled: the next one's
            else:
                self.waiting.remove(turn)
            raise

    def release(self) -> None:
        """Give a slot back: to the first call waiting, if any."""
        waiting = self.waiting
        if waiting:
            waiting.popleft().set()
        else:
            self.free += 1
