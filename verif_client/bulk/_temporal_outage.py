"""Riding out a Temporal server that is briefly away or pushing back.

A worker's calls to Temporal (reading the job's record, claiming request ids,
leasing its share of the rate, waiting for the job's end) are retried with
backoff for as long as the server answers "unavailable", "busy" or "too many
updates in flight": those say nothing about the job, so they never end a row
``unknown`` nor a worker with exit 70. An outage is told in one line when it
starts and one when it ends, per process, instead of the SDK's retry warnings.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import anyio
import temporalio.client
import temporalio.runtime
import temporalio.service

from .._terminal import safe

T = TypeVar("T")

# Answers that say the server is away or busy, not that the call is wrong.
_TRANSIENT: Final = frozenset(
    {
        temporalio.service.RPCStatusCode.UNAVAILABLE,
        temporalio.service.RPCStatusCode.DEADLINE_EXCEEDED,
        temporalio.service.RPCStatusCode.RESOURCE_EXHAUSTED,
        temporalio.service.RPCStatusCode.ABORTED,
        temporalio.service.RPCStatusCode.CANCELLED,
        temporalio.service.RPCStatusCode.UNKNOWN,
        temporalio.service.RPCStatusCode.INTERNAL,
    }
)
_FIRST_DELAY: Final = 0.2
_LONGEST_DELAY: Final = 5.0


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is the server away or pushing back (worth waiting out)."""
    if isinstance(exc, temporalio.client.RPCTimeoutOrCancelledError):
        return True  # an update or a long poll that the server did not finish in time
    if isinstance(exc, temporalio.client.WorkflowUpdateFailedError):
        # "workflow update was aborted": the workflow moved on (continued as new,
        # its task failed and is retried) before it took the update.
        return "aborted" in str(exc.cause).lower()
    return isinstance(exc, temporalio.service.RPCError) and exc.status in _TRANSIENT


def is_not_found(exc: BaseException) -> bool:
    """Whether ``exc`` says the workflow asked for has ended or never was."""
    return (
        isinstance(exc, temporalio.service.RPCError)
        and exc.status == temporalio.service.RPCStatusCode.NOT_FOUND
    )


class Outage:
    """One line when the server stops answering, one when it is back."""

    def __init__(self, say: Callable[[str], None] | None = None) -> None:
        self._say = say or _to_stderr
        self._since: float | None = None

    def begin(self, what: str, exc: BaseException) -> None:
        if self._since is None:
            self._since = time.monotonic()
            cause = safe(str(getattr(exc, "message", "") or exc).strip().splitlines()[0][:160])
            self._say(f"Temporal is unreachable or busy ({what}: {cause}); waiting for it")

    def end(self) -> None:
        if self._since is not None:
            away = time.monotonic() - self._since
            self._since = None
            self._say(f"Temporal answers again (after {away:.0f} s)")


def _to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


# Every process of a job tells of an outage once, whichever call met it.
OUTAGE: Final = Outage()


async def persist(call: Callable[[], Awaitable[T]], what: str, outage: Outage = OUTAGE) -> T:
    """``call()``, again and again with backoff while the server is away or
    busy; any other failure is raised at once."""
    delay = _FIRST_DELAY
    while True:
        try:
            result = await call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            outage.begin(what, exc)
        else:
            outage.end()
            return result
        await anyio.sleep(delay)
        delay = min(delay * 2, _LONGEST_DELAY)


_runtime: temporalio.runtime.Runtime | None = None


def quiet_runtime() -> temporalio.runtime.Runtime:
    """The SDK's runtime with its core's retry warnings off (an outage prints
    dozens of them per process): :class:`Outage` says it in one line."""
    global _runtime
    if _runtime is None:
        _runtime = temporalio.runtime.Runtime(
            telemetry=temporalio.runtime.TelemetryConfig(
                logging=temporalio.runtime.LoggingConfig(
                    filter=temporalio.runtime.TelemetryFilter(
                        core_level="ERROR", other_level="ERROR"
                    )
                ),
                metrics=None,
            )
        )
    return _runtime
