"""A hang fails its test within the per-test timeout, on every backend.

pytest-timeout (``timeout`` in pyproject.toml, a ``@pytest.mark.timeout(n)``
to give one long test more) interrupts a hung test with SIGALRM. That reaches
a synchronous test and an asyncio one, but not a trio one: anyio runs trio as a
guest whose I/O waits happen in a worker thread, the kernel may hand the signal
to that thread, and the main thread sleeps on a lock until the run's time limit.
So an async test's body also runs under a cancel scope of the same length,
which fails it cleanly on both backends and lets the run go on; for trio tests
pytest-timeout's thread method, at twice that, is the backstop for a hang the
scope cannot reach (a fixture, a shielded wait): it dumps every thread's stack
and ends the run, which is still minutes sooner than CI's limit.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Generator
from typing import Any

import anyio
import pytest


def timeout_of(item: pytest.Item) -> float:
    """The item's timeout in seconds: its marker's, else the configured one (0 = none)."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and (marker.args or "timeout" in marker.kwargs):
        return float(marker.args[0] if marker.args else marker.kwargs["timeout"])
    configured = item.config.getoption("timeout", None) or item.config.getini("timeout")
    return float(configured or 0)


def _backend(item: pytest.Item) -> str:
    callspec = getattr(item, "callspec", None)
    backend = callspec.params.get("anyio_backend") if callspec else None
    return str(backend[0] if isinstance(backend, tuple) else backend or "")


_TIMEOUT = pytest.StashKey[float]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        seconds = item.stash[_TIMEOUT] = timeout_of(item)
        if seconds > 0 and _backend(item) == "trio":
            item.add_marker(pytest.mark.timeout(2 * seconds, method="thread"), append=False)


def _bounded(
    test: Callable[..., Coroutine[Any, Any, Any]], seconds: float
) -> Callable[..., Coroutine[Any, Any, Any]]:
    async def bounded(**kwargs: Any) -> Any:
        with anyio.move_on_after(seconds) as scope:
            return await test(**kwargs)
        if scope.cancelled_caught:
            pytest.fail(f"hung: still running after the {seconds:g} s per-test timeout")
        return None

    return bounded


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, None, None]:
    seconds = pyfuncitem.stash.get(_TIMEOUT, 0.0) if _backend(pyfuncitem) else 0.0
    original = pyfuncitem.obj
    # Hypothesis' async tests are run by anyio through their inner test: left to pytest-timeout.
    wrap = seconds > 0 and inspect.iscoroutinefunction(original)
    if wrap and not hasattr(original, "hypothesis"):
        pyfuncitem.obj = _bounded(original, seconds)
    try:
        yield
    finally:
        pyfuncitem.obj = original
