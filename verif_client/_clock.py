"""The running event loop's primitives, without anyio's lookup on every call.

Every top-level anyio function (``current_time``, ``CancelScope``,
``lowlevel.checkpoint_if_cancelled`` ...) first finds the running backend
through sniffio: 2-3 µs, several times per request on the hot path. The
backend is the same for the whole life of a loop, so it is looked up once.
"""

from __future__ import annotations

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

        return asyncio.get_running_loop().time
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
