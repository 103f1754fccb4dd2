"""The running event loop's primitives, without anyio's lookup on every call.

Every top-level anyio function (``current_time``, ``CancelScope``,
``lowlevel.checkpoint_if_cancelled`` ...) first finds the running backend
through sniffio: 2-3 µs, several times per request on the hot path. The
backend is the same for the whole life of a loop, so it is looked up once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel

try:
    # What anyio's top-level functions call first; guarded, as it is not public.
    from anyio._core._eventloop import get_async_backend
except ImportError:  # pragma: no cover
    get_async_backend = None  # type: ignore[assignment]


class _Portable:
    """The public anyio functions, for an anyio without get_async_backend."""

    current_time = staticmethod(anyio.current_time)
    checkpoint_if_cancelled = staticmethod(anyio.lowlevel.checkpoint_if_cancelled)

    @staticmethod
    def create_cancel_scope(*, deadline: float = float("inf"), shield: bool = False) -> Any:
        return anyio.CancelScope(deadline=deadline, shield=shield)


def loop_backend() -> Any:
    """The running backend's class (asyncio's or trio's): ``current_time()``,
    ``checkpoint_if_cancelled()`` and ``create_cancel_scope(deadline=...)``
    behave as anyio's functions of those names. Typed loosely: anyio's
    backend class is not public API."""
    if get_async_backend is None:  # pragma: no cover
        return _Portable
    return get_async_backend()


def loop_clock() -> Callable[[], float]:
    """A function reading the clock ``anyio.current_time()`` reads, on the
    running event loop.

    On asyncio it is the running loop's own ``time``: anyio's reading looks
    the loop up each time, and on Python 3.11 every such lookup is a getpid()
    system call (asyncio's check against a fork)."""
    backend = loop_backend()
    if backend.__name__ == "AsyncIOBackend":
        import asyncio

        loop = asyncio.get_running_loop()
        if type(loop).time is asyncio.BaseEventLoop.time:
            # What that method returns, without its Python frame: a poll
            # reads the clock some seven times.
            return time.monotonic
        return loop.time
    clock: Callable[[], float] = backend.current_time
    return clock


def running_loop() -> object:
    """The running event loop itself (asyncio's loop, or trio's run token):
    what state bound to one loop (connections, semaphores, clocks) is
    compared against, so that a client used by ``asyncio.run`` twice never
    touches the first loop's objects from the second."""
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        pass
    import trio

    return trio.lowlevel.current_trio_token()


def cancel_pending() -> Callable[[], bool]:
    """A plain function, on the running loop, telling whether
    ``checkpoint_if_cancelled()`` could raise now: when it says False, that
    await can be skipped.

    On asyncio, anyio's check finds the running task through
    ``asyncio.current_task()``, whose loop lookup is a getpid() system call
    on Python 3.11, and it is a coroutine: together about 3 % of a poll's
    instructions when taken once per outcome. This looks at the same state
    (the task's anyio cancel scopes, innermost out to the first shield)
    with neither, through the scopes' private fields (checked to exist).
    On trio, or if anyio's internals are not as expected, the answer is
    always True, so the check is always awaited."""
    if loop_backend().__name__ == "AsyncIOBackend":
        try:
            from anyio._backends._asyncio import CancelScope, _task_states
        except ImportError:  # pragma: no cover - anyio moved its internals
            pass
        else:
            probe = CancelScope()
            if all(hasattr(probe, name) for name in ("_cancel_called", "_shield", "_parent_scope")):
                import asyncio

                return _AsyncioCancelPending(asyncio.get_running_loop(), _task_states)
    return _always


def _always() -> bool:
    return True


class _AsyncioCancelPending:
    __slots__ = ("_current_task", "_loop", "_state", "_task", "_task_states")

    def __init__(self, loop: object, task_states: Any) -> None:
        import asyncio

        # asyncio's own table of running tasks by loop, where it is one
        # (CPython's, which uvloop's tasks use too): current_task(loop) is
        # its get(loop), without a Python call of its own per check.
        tasks = getattr(asyncio.tasks, "_current_tasks", None)
        self._current_task = tasks.get if isinstance(tasks, dict) else asyncio.current_task
        self._loop = loop
        self._task_states = task_states
        self._task: object = None
        self._state: Any = None

    def __call__(self) -> bool:
        task = self._current_task(self._loop)  # type: ignore[arg-type]
        if task is None:
            return False  # outside any task, as anyio's check returns at once
        if task is not self._task:
            # A task's state, once made, stays for its life: kept for the next call.
            state = self._task_states.get(task)
            if state is None:
                return False  # never in a cancel scope: nothing can cancel it
            self._task, self._state = task, state
        scope = self._state.cancel_scope
        try:
            while scope is not None:
                # What the properties cancel_called and shield return,
                # without a Python call each, for every scope out to the root.
                if scope._cancel_called:
                    return True
                if scope._shield:
                    return False
                scope = scope._parent_scope
        except AttributeError:  # pragma: no cover - anyio moved its internals
            return True
        return False
