"""The Temporal workflows of a bulk job: deterministic, no I/O, no credentials.

One ``verif-client.job`` workflow per job (id ``verif-job/ID``) holds what the
job is (its input's digest, its batches, how rows are polled) and the job's
rate (a GCRA, handed out in slots through an update). One ``verif-client.rows``
workflow per batch of rows (id ``verif-job/ID/rows/FIRST_LINE``) drives each
of its rows: one send activity (at most once: ``maximum_attempts=1``), then
one answers activity for the batch, which waits in the worker's own poller.
Ids derive from the job and its rows, so loading twice starts nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

from ._job import RowState

SEND_ACTIVITY = "verif-client.send"
ANSWERS_ACTIVITY = "verif-client.answers"
# The answers wait outside the send slots: a long wait must not starve the sends.
ANSWERS_QUEUE_SUFFIX = "/answers"
IN_FLIGHT_REASON = (
    "the SMS request was in flight when its worker died or timed out; it may or may not "
    "have been sent (--resend-unknown sends it again, texting twice if it was)"
)
# Rows one send activity sends at once: its events are shared by them all.
SEND_GROUP = 10
# A job's rate slots are handed out a few at a time; a history this long
# continues as new, so the job's history stays bounded however long it runs.
_JOB_HISTORY_LIMIT = 2_000


def job_workflow_id(job: str) -> str:
    return f"verif-job/{job}"


def rows_workflow_id(job: str, first_line: int) -> str:
    return f"verif-job/{job}/rows/{first_line}"


@dataclasses.dataclass
class Row:
    """One row as the workflows hold it (``state``: a :class:`RowState`)."""

    line: int
    user_id: str | None
    phone_number: str | None
    question: str | None
    state: str
    request_id: int | None = None
    sent_at: float | None = None
    result: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Polling:
    """How a job's rows are polled (the job's, whichever worker polls)."""

    location: bool
    deadline: float
    false_means: str
    initial_delay: float
    multiplier: float
    max_delay: float
    jitter: float


@dataclasses.dataclass
class JobSpec:
    job: str
    input_digest: str
    batches: list[int]  # each batch's first line
    rows: int
    polling: Polling
    heartbeat: float
    task_queue: str


@dataclasses.dataclass
class JobState:
    done: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    next_slot: float = 0.0


@dataclasses.dataclass
class Batch:
    job: str
    rows: list[Row]
    polling: Polling
    heartbeat: float
    task_queue: str


@dataclasses.dataclass
class ToSend:
    line: int
    phone_number: str
    question: str


@dataclasses.dataclass
class SendRequest:
    """A few rows sent together by one activity (fewer events per row)."""

    job: str
    rows: list[ToSend]


@dataclasses.dataclass
class SendOutcome:
    """``state``: ``sent`` (with its request id), a final state, or ``queued``
    (stopped before the request was written: sent later, by any worker)."""

    line: int
    state: str
    request_id: int | None = None
    sent_at: float | None = None
    result: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Awaited:
    line: int
    request_id: int
    sent_at: float


@dataclasses.dataclass
class AnswersRequest:
    job: str
    rows: list[Awaited]
    polling: Polling


@dataclasses.dataclass
class Answer:
    line: int
    state: str
    result: dict[str, Any]


def counts_of(rows: list[Row]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.state] = counts.get(row.state, 0) + 1
    return counts


@workflow.defn(name="verif-client.job")
class JobWorkflow:
    def __init__(self) -> None:
        self.spec: JobSpec | None = None
        self.state = JobState()

    @workflow.run
    async def run(self, spec: JobSpec, state: JobState | None = None) -> dict[str, int]:
        self.spec = spec
        self.state = state or JobState()
        await workflow.wait_condition(
            lambda: (
                len(self.state.done) == len(spec.batches)
                or workflow.info().get_current_history_length() > _JOB_HISTORY_LIMIT
            )
        )
        if len(self.state.done) < len(spec.batches):
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(args=[spec, self.state])
        totals: dict[str, int] = {}
        for counts in self.state.done.values():
            for name, count in counts.items():
                totals[name] = totals.get(name, 0) + count
        return totals

    @workflow.signal
    def batch_done(self, batch: str, counts: dict[str, int]) -> None:
        self.state.done[batch] = counts

    @workflow.query
    def describe(self) -> JobSpec:
        assert self.spec is not None
        return self.spec

    @workflow.update
    def take(self, slots: int, rate: float) -> float:
        """Reserve ``slots`` requests at ``rate`` per second for the whole job;
        return when (seconds since the epoch) the first may go, the rest
        following every 1/rate seconds."""
        start = max(workflow.now().timestamp(), self.state.next_slot)
        self.state.next_slot = start + slots / rate
        return start


@workflow.defn(name="verif-client.rows")
class RowsWorkflow:
    def __init__(self) -> None:
        self.rows: list[Row] = []

    @workflow.run
    async def run(self, batch: Batch) -> list[Row]:
        self.rows = batch.rows
        queued = [row for row in self.rows if row.state == RowState.QUEUED]
        groups = [queued[index : index + SEND_GROUP] for index in range(0, len(queued), SEND_GROUP)]
        await asyncio.gather(*(self._send(batch, group) for group in groups))
        sent = [row for row in self.rows if row.state == RowState.SENT]
        if sent:
            await self._answers(batch, sent)
        job = workflow.get_external_workflow_handle(job_workflow_id(batch.job))
        done = [workflow.info().workflow_id, counts_of(self.rows)]
        # A job already closed (rows sent again after it finished) needs no word.
        with contextlib.suppress(FailureError):
            await job.signal("batch_done", args=done)
        return self.rows

    @workflow.query
    def snapshot(self) -> list[Row]:
        return self.rows

    async def _send(self, batch: Batch, group: list[Row]) -> None:
        while group:
            for row in group:
                row.state = RowState.SENDING
            rows = [ToSend(row.line, row.phone_number or "", row.question or "") for row in group]
            try:
                outcomes: list[SendOutcome] = await workflow.execute_activity(
                    SEND_ACTIVITY,
                    SendRequest(batch.job, rows),
                    result_type=list[SendOutcome],
                    task_queue=batch.task_queue,
                    # Never retried: a send whose fate is unknown is not sent again.
                    retry_policy=RetryPolicy(maximum_attempts=1),
                    start_to_close_timeout=timedelta(minutes=10),
                    heartbeat_timeout=timedelta(seconds=batch.heartbeat),
                )
            except ActivityError:
                # The worker died, or the activity timed out, its requests maybe written.
                for row in group:
                    row.state = RowState.UNKNOWN
                    row.result = {"reason": IN_FLIGHT_REASON}
                return
            by_line = {row.line: row for row in group}
            for outcome in outcomes:
                row = by_line[outcome.line]
                row.state = outcome.state
                row.request_id = outcome.request_id
                row.sent_at = outcome.sent_at
                row.result = outcome.result
            # Rows a stopping worker did not write go again, to any worker.
            group = [row for row in group if row.state == RowState.QUEUED]

    async def _answers(self, batch: Batch, sent: list[Row]) -> None:
        waiting = sent
        while waiting:
            request = AnswersRequest(
                batch.job,
                [Awaited(row.line, row.request_id or 0, row.sent_at or 0.0) for row in waiting],
                batch.polling,
            )
            # Answers come back once at least half the rows have one.
            answers: list[Answer] = await workflow.execute_activity(
                ANSWERS_ACTIVITY,
                request,
                result_type=list[Answer],
                task_queue=batch.task_queue + ANSWERS_QUEUE_SUFFIX,
                # Polling is safe to repeat: a dead worker's wait is taken over by another.
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10)
                ),
                start_to_close_timeout=timedelta(seconds=batch.polling.deadline + 3600),
                heartbeat_timeout=timedelta(seconds=batch.heartbeat),
            )
            by_line = {row.line: row for row in waiting}
            for answer in answers:
                row = by_line[answer.line]
                row.state = answer.state
                row.result = answer.result
            waiting = [row for row in waiting if row.state == RowState.SENT]
