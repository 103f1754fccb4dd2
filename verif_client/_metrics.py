"""The metrics of a run: one table, and the hooks that turn events into them.

OpenTelemetry (``_otel``) and Prometheus (``_prometheus``) are two backends of
the same table, so a metric has one name, one meaning and the same labels in
both (Prometheus spells the name with underscores and a unit suffix).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from typing import Final, Protocol

import attrs

from ._hooks import (
    Hooks,
    LimitWaited,
    PollAdded,
    PollSettled,
    RateChanged,
    RequestEnded,
    RetryScheduled,
)


class Kind(enum.Enum):
    COUNTER = "counter"
    UP_DOWN = "up_down_counter"
    HISTOGRAM = "histogram"
    GAUGE = "gauge"  # observed when read


@attrs.frozen(slots=True)
class Metric:
    name: str
    prometheus_name: str
    kind: Kind
    unit: str
    description: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()


_SECONDS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Answers come from people: seconds to the length of a poll run.
_ANSWER_SECONDS: Final = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)

REQUESTS: Final = Metric(
    "verif_client.requests",
    "verif_client_requests",
    Kind.COUNTER,
    "{call}",
    "Calls of an operation (retries inside a call not counted: see retries), by outcome "
    "(success, error, cancelled)",
    ("operation", "binding", "outcome"),
)
REQUEST_DURATION: Final = Metric(
    "verif_client.request.duration",
    "verif_client_request_duration_seconds",
    Kind.HISTOGRAM,
    "s",
    "Duration of a call, its waits and retries included",
    ("operation", "binding", "outcome"),
    _SECONDS,
)
RETRIES: Final = Metric(
    "verif_client.retries",
    "verif_client_retries",
    Kind.COUNTER,
    "{retry}",
    "Attempts that failed and were repeated, by the error's class name",
    ("operation", "binding", "error_type"),
)
LIMIT_WAIT: Final = Metric(
    "verif_client.limit.wait",
    "verif_client_limit_wait_seconds",
    Kind.HISTOGRAM,
    "s",
    "Time an attempt waited for the rate limiter (limit=rate) or a connection slot "
    "(limit=connection)",
    ("limit",),
    _SECONDS,
)
SLOWDOWNS: Final = Metric(
    "verif_client.slowdowns",
    "verif_client_slowdowns",
    Kind.COUNTER,
    "{slowdown}",
    "Answers 429 (too many requests) that halved the client's pace, by the operation answered",
    ("operation",),
)
POLL_WAITING: Final = Metric(
    "verif_client.poll.waiting",
    "verif_client_poll_waiting",
    Kind.UP_DOWN,
    "{id}",
    "Ids being polled that have no outcome yet",
    ("operation",),
)
POLL_OLDEST: Final = Metric(
    "verif_client.poll.oldest_age",
    "verif_client_poll_oldest_age_seconds",
    Kind.GAUGE,
    "s",
    "Age of the oldest id still waiting for an outcome (0 when none is)",
    (),
)
TIME_TO_ANSWER: Final = Metric(
    "verif_client.poll.time_to_answer",
    "verif_client_poll_time_to_answer_seconds",
    Kind.HISTOGRAM,
    "s",
    "Time from adding an id to its outcome, by outcome status",
    ("operation", "status"),
    _ANSWER_SECONDS,
)
POLL_OUTCOMES: Final = Metric(
    "verif_client.poll.outcomes",
    "verif_client_poll_outcomes",
    Kind.COUNTER,
    "{id}",
    "Outcomes of polled ids, by status (verified, declined, located, timed_out, failed)",
    ("operation", "status"),
)
# Served by the CLI only: it alone runs a job.
JOB_ROWS: Final = Metric(
    "verif_client.job.rows",
    "verif_client_job_rows",
    Kind.GAUGE,
    "{row}",
    "Rows of the bulk job by state, as this worker last saw them (pending: not finished)",
    ("state",),
)

METRICS: Final = (
    REQUESTS,
    REQUEST_DURATION,
    RETRIES,
    LIMIT_WAIT,
    SLOWDOWNS,
    POLL_WAITING,
    POLL_OLDEST,
    TIME_TO_ANSWER,
    POLL_OUTCOMES,
)


class Backend(Protocol):
    """Where the numbers go: one instrument per :class:`Metric` of the table."""

    def add(self, metric: Metric, value: float, labels: Mapping[str, str]) -> None:
        """Add to a counter or an up-down counter."""

    def record(self, metric: Metric, value: float, labels: Mapping[str, str]) -> None:
        """Record one value in a histogram."""


class MetricsHooks(Hooks):
    """Hooks that keep the table's metrics in a backend."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        # When each waiting id was added (monotonic clock: read from other threads).
        self._waiting_since: dict[tuple[str, int], float] = {}

    def on_request_ended(self, event: RequestEnded) -> None:
        labels = {
            "operation": event.operation,
            "binding": event.binding.value,
            "outcome": event.outcome,
        }
        self._backend.add(REQUESTS, 1, labels)
        self._backend.record(REQUEST_DURATION, event.duration, labels)

    def on_retry_scheduled(self, event: RetryScheduled) -> None:
        labels = {
            "operation": event.operation,
            "binding": event.binding.value,
            "error_type": event.error_type,
        }
        self._backend.add(RETRIES, 1, labels)

    def on_limit_waited(self, event: LimitWaited) -> None:
        self._backend.record(LIMIT_WAIT, event.seconds, {"limit": event.limit})

    def on_rate_changed(self, event: RateChanged) -> None:
        if event.rate is not None:
            self._backend.add(SLOWDOWNS, 1, {"operation": event.operation or ""})

    def on_poll_added(self, event: PollAdded) -> None:
        self._waiting_since[(event.operation, event.request_id)] = time.monotonic()
        self._backend.add(POLL_WAITING, 1, {"operation": event.operation})

    def on_poll_settled(self, event: PollSettled) -> None:
        self._waiting_since.pop((event.operation, event.request_id), None)
        self._backend.add(POLL_WAITING, -1, {"operation": event.operation})
        if event.status is None:
            return  # the run ended without an outcome for it: neither answer nor timeout
        labels = {"operation": event.operation, "status": event.status.value}
        self._backend.add(POLL_OUTCOMES, 1, labels)
        self._backend.record(TIME_TO_ANSWER, event.age, labels)

    def oldest_age(self) -> float:
        """Seconds the oldest waiting id has waited (0 when none waits)."""
        # A copy made in one C call: safe against the event loop adding meanwhile.
        started = list(self._waiting_since.values())
        return time.monotonic() - min(started) if started else 0.0
