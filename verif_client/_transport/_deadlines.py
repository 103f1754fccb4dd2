"""The attempts' deadlines on asyncio: one timer for all of them, O(1) per attempt.

A cancel scope with a deadline schedules a timer of its own on asyncio: a
``TimerHandle`` pushed on the loop's heap and, once cancelled, popped again,
each push and pop O(log n) comparisons of Python objects, n growing with the
attempts in flight (the pool's size). Every attempt of a pool has the same
time limit, so their deadlines come in order: a first-in-first-out queue
holds them, and one timer, for the earliest, cancels what is due. An attempt
whose deadline comes before an earlier one's (a retry with less time left)
keeps a deadline of its own.

What is cut is anything with a ``cancel()``: a cancel scope, or the receiver
of a connection whose attempt waits only for its answer (see _pool).
"""

from __future__ import annotations

import asyncio
import math
from collections import OrderedDict
from typing import Any


def deadlines_for(backend: Any, kept: Deadlines | None = None) -> Deadlines | None:
    """The running asyncio loop's shared deadlines (``kept``, if of this loop);
    None on trio, whose cancel scopes cost no timer object of their own."""
    if backend.__name__ != "AsyncIOBackend":
        return None
    loop = asyncio.get_running_loop()
    return kept if kept is not None and kept.loop is loop else Deadlines(loop)


class Deadlines:
    """Cancel scopes to cancel at their deadlines, kept in deadline order."""

    __slots__ = ("_last", "_loop", "_pending", "_timer", "drop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        # Insertion order is deadline order (see add): the first is the earliest.
        self._pending: OrderedDict[Any, float] = OrderedDict()
        # ``drop(scope, None)``: discard() as the dict's own method, with no
        # Python frame, for the attempts that end once per poll.
        self.drop = self._pending.pop
        self._timer: asyncio.TimerHandle | None = None
        self._last = -math.inf

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def add(self, scope: Any, deadline: float) -> bool:
        """Cancel ``scope`` at ``deadline``; False (and nothing done) if it would
        come before a deadline already kept: give the scope its own then."""
        if deadline < self._last:
            return False
        self._last = deadline
        self._pending[scope] = deadline
        if self._timer is None:
            self._timer = self._loop.call_at(deadline, self._expire)
        return True

    def discard(self, scope: Any) -> None:
        """The scope is done: nothing to cancel any more."""
        self._pending.pop(scope, None)

    def _expire(self) -> None:
        # Attempts end long before their deadlines, so this usually finds the
        # earliest still ahead and only sets the timer again: once per time limit.
        self._timer = None
        pending = self._pending
        now = self._loop.time()
        due = []
        while pending:
            scope, deadline = next(iter(pending.items()))
            if deadline > now:
                self._timer = self._loop.call_at(deadline, self._expire)
                break
            del pending[scope]
            due.append(scope)
        # Cancelled once the timer is set again: a receiver's cancel runs its
        # attempt's end at once (see _pool's attempts at once), which may add
        # the next attempt's deadline here.
        for scope in due:
            scope.cancel()
