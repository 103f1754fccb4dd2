"""The running event loop's clock, read without anyio's per-call lookup."""

from __future__ import annotations

from collections.abc import Callable

import anyio

try:
    # What anyio.current_time() calls on every reading, after looking the
    # backend up (sniffio, about 1 µs); guarded, as it is not public.
    from anyio._core._eventloop import get_async_backend
except ImportError:  # pragma: no cover
    get_async_backend = None  # type: ignore[assignment]


def loop_clock() -> Callable[[], float]:
    """A function reading the clock ``anyio.current_time()`` reads, on the
    running event loop: the hot path reads it several times per request, so
    the backend is looked up once instead of at each reading."""
    if get_async_backend is None:  # pragma: no cover
        return anyio.current_time
    return get_async_backend().current_time
