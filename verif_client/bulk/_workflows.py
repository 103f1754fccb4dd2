"""The Temporal workflows of a bulk job: deterministic, no I/O, no credentials.

One ``verif-client.job`` workflow per job (id ``verif-job/ID``) holds what the
job is (its input's digest, its batches, how rows are polled) and the job's
rate (a GCRA, handed out in slots through an update). One ``verif-client.rows``
workflow per batch of rows (id ``verif-job/ID/rows/FIRST_LINE``) drives each
of its rows: one send activity (at most once: ``maximum_attempts=1``), then
one answers activity for the batch, which waits in the worker's own poller.
Ids derive from the job and its rows, so loading twice starts nothing twice.

A job stops at once when a send meets a failure every row would meet (the
service refused the credentials): the rows workflow that hears of it tells the
job workflow, which records why (in its memo, where every worker and process
reads it) and tells every batch to send nothing more; its rows stay queued
until a later ``bulk run`` resumes the job. The request ids the service gave
are kept in ``verif-client.ids`` workflows (``verif-job/ID/ids/N``, ids spread
over them by value), so that an id given to two rows is seen however far apart
they are.
"""

# No `from __future__ import annotations` here: the SDK's converter reads
# these dataclasses' field types with typing.get_type_hints for every value it
# decodes, and string annotations are compiled anew each time (a third of a
# worker's CPU per row went there).

import asyncio
import contextlib
import dataclasses
import functools
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

from ._job import FINAL_STATES, RowState, is_resent

SEND_ACTIVITY = "verif-client.send"
ANSWERS_ACTIVITY = "verif-client.answers"
# The answers wait outside the send slots: a long wait must not starve the sends.
ANSWERS_QUEUE_SUFFIX = "/answers"
IN_FLIGHT_REASON = (
    "the SMS request was in flight when its worker died or timed out; it may or may not "
    "have been sent (--resend-unknown sends it again, texting twice if it was)"
)
# Rows one send activity sends at once: its events are shared by them all.
# A job loaded before groups followed --concurrency sends SEND_GROUP.
SEND_GROUP = 10
MAX_SEND_GROUP = 50
# Rows per batch workflow at the least (see batch_of).
DEFAULT_BATCH = 100
# A job's rate slots are handed out a few at a time; a history this long
# continues as new, so the job's history stays bounded however long it runs.
_JOB_HISTORY_LIMIT = 2_000
# Request ids kept by one ids workflow, about: its state stays far below
# Temporal's payload limit (2 MB) when it continues as new.
_IDS_PER_SHARD = 20_000
# Memo keys of the job workflow, beside "spec": why it stopped (None: it
# runs) and how many times it was resumed after a stop.
STOPPED_MEMO = "stopped"
EPOCH_MEMO = "epoch"
# Every batch of the job was started: a run that joins need not start them.
LOADED_MEMO = "loaded"
# Memo keys of a rows workflow, read by `bulk status` and `bulk export` with no
# worker (no query): its counts by state, and its rows that reached a final
# state, a key per change (DONE_MEMO + N), so each row enters the history once.
COUNTS_MEMO = "counts"
DONE_MEMO = "done/"
_PROGRESS_PATCH = "progress-memo"
_PIPELINE_PATCH = "answers-as-sent"
_LAST_WAVE_PATCH = "last-wave-at-once"


def job_workflow_id(job: str) -> str:
    return f"verif-job/{job}"


def rows_workflow_id(job: str, first_line: int) -> str:
    return f"verif-job/{job}/rows/{first_line}"


def ids_workflow_id(job: str, shard: int) -> str:
    return f"verif-job/{job}/ids/{shard}"


def send_group_of(concurrency: int) -> int:
    """Rows per send activity of a job loaded by a run of ``concurrency``:
    all of it (a worker takes an activity when it can send all its rows at
    once: see _temporal_capacity). Half of it let a worker fetch its next
    activity while the last one's rows ended, and kept a few more requests in
    flight, but it took twice the activities, and their workflow tasks and
    answers waves: a CPU-bound worker and its server spent a sixth more CPU
    a row for no more rows a second. At least SEND_GROUP (an action per
    activity: a run of --concurrency 1 pays one per 10 rows, as before), at
    most MAX_SEND_GROUP."""
    return max(SEND_GROUP, min(concurrency, MAX_SEND_GROUP))


def batch_of(send_group: int) -> int:
    """Rows per batch workflow, unless the journal's URL says (``batch=``):
    four send groups, at least DEFAULT_BATCH. A batch costs a workflow start,
    its answers waves and its workflow tasks: with groups of 50, batches of
    200 took 0.052 Temporal actions a row against 0.064 in batches of 100, for
    the same rows a second. Groups of 10 keep batches of 100: fewer, larger
    batches put a latency-bound job's polls on fewer workers."""
    return max(DEFAULT_BATCH, 4 * send_group)


def id_shards(rows: int) -> int:
    """How many ids workflows keep the request ids of a job of ``rows`` rows."""
    return max(1, -(-rows // _IDS_PER_SHARD))


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
    # What the job asks (a digest: the memo is readable by anyone who can read
    # the namespace); "" for a job loaded before it was recorded.
    question_digest: str = ""
    send_group: int = SEND_GROUP


@dataclasses.dataclass
class Lease:
    """A worker's share of the job's rate, per second, until ``until``."""

    share: float
    until: float
    # Workers of the job waiting for a share: the holders renew soon to make room.
    waiting: int = 0


@dataclasses.dataclass
class JobState:
    done: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    next_slot: float = 0.0
    # Why the job stopped (None: it runs), and how often it was resumed.
    stopped: str | None = None
    epoch: int = 0
    # Each worker's share of the rate (by the worker's own id).
    leases: dict[str, Lease] = dataclasses.field(default_factory=dict)
    loaded: bool = False


@dataclasses.dataclass
class Batch:
    job: str
    rows: list[Row]
    polling: Polling
    heartbeat: float
    task_queue: str
    # Rows per send activity (a batch started before this had SEND_GROUP).
    send_group: int = SEND_GROUP


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
    (stopped before the request was written, or refused in a way that proves
    nothing left: sent later, by any worker). ``stopped``: why the whole job
    stops (the row is queued)."""

    line: int
    state: str
    request_id: int | None = None
    sent_at: float | None = None
    result: dict[str, Any] = dataclasses.field(default_factory=dict)
    stopped: str | None = None
    epoch: int = 0  # of the job, when the activity read it


@dataclasses.dataclass
class SendProgress:
    """What a send activity tells the server (its heartbeat) before it sends
    anything: the rows it will not send (no room for them at once)."""

    unsent: list[int]


def _unsent_lines(err: ActivityError) -> set[int]:
    """The rows a send activity that did not report said it would never send
    (in a :class:`SendProgress`, its heartbeat; an activity that heartbeats
    nothing else, and one older than these, say none)."""
    cause = err.cause
    if not isinstance(cause, TemporalTimeoutError) or not cause.last_heartbeat_details:
        return set()
    progress = cause.last_heartbeat_details[0]
    unsent = progress.get("unsent") if isinstance(progress, dict) else None
    if not isinstance(unsent, list):
        return set()
    return {line for line in unsent if isinstance(line, int) and not isinstance(line, bool)}


@dataclasses.dataclass
class Claimed:
    """A request id the service gave a row."""

    line: int
    request_id: int


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
        self.closing = False

    @workflow.run
    async def run(self, spec: JobSpec, state: JobState | None = None) -> dict[str, int]:
        self.spec = spec
        self.state = state or JobState()
        while True:
            await workflow.wait_condition(
                lambda: (
                    len(self.state.done) == len(spec.batches)
                    or workflow.info().get_current_history_length() > _JOB_HISTORY_LIMIT
                )
            )
            await workflow.wait_condition(workflow.all_handlers_finished)
            if len(self.state.done) < len(spec.batches):
                if workflow.info().get_current_history_length() > _JOB_HISTORY_LIMIT:
                    workflow.continue_as_new(args=[spec, self.state], memo=self._memo())
                continue  # a batch was reopened (rows sent again) meanwhile
            # From here the job ends: no batch is reopened (see reopen's validator).
            self.closing = True
            break
        # A job that ran before ids workflows existed ends as it did then (replay).
        if workflow.patched("close-ids-workflows"):
            for shard in range(id_shards(spec.rows)):
                ids = workflow.get_external_workflow_handle(ids_workflow_id(spec.job, shard))
                # A shard no send reached was never started.
                with contextlib.suppress(FailureError):
                    await ids.signal(IdsWorkflow.close)
        totals: dict[str, int] = {}
        for counts in self.state.done.values():
            for name, count in counts.items():
                totals[name] = totals.get(name, 0) + count
        return totals

    @workflow.signal
    def batch_done(self, batch: str, counts: dict[str, int]) -> None:
        self.state.done[batch] = counts

    def _memo(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            STOPPED_MEMO: self.state.stopped,
            EPOCH_MEMO: self.state.epoch,
            LOADED_MEMO: self.state.loaded,
        }

    @workflow.signal
    def loaded(self) -> None:
        """Every batch of the job was started (by the run that loaded it)."""
        if not self.state.loaded:
            self.state.loaded = True
            workflow.upsert_memo({LOADED_MEMO: True})

    async def _tell_batches(self, signal: str) -> None:
        assert self.spec is not None

        async def tell(batch: str) -> None:
            # A batch closed meanwhile needs no word.
            with contextlib.suppress(FailureError):
                await workflow.get_external_workflow_handle(batch).signal(signal)

        batches = (rows_workflow_id(self.spec.job, first) for first in self.spec.batches)
        await asyncio.gather(*(tell(batch) for batch in batches if batch not in self.state.done))

    @workflow.signal
    async def stop(self, reason: str, epoch: int) -> None:
        """A send met a failure every row would meet: record why, for every
        worker and process to see, and stop every batch's sends. A failure
        met before the job was last resumed (``epoch``) is the past's."""
        if self.state.stopped is not None or epoch < self.state.epoch:
            return
        self.state.stopped = reason
        workflow.upsert_memo({STOPPED_MEMO: reason})
        await self._tell_batches("stop")

    @workflow.update
    def reopen(self, batches: list[str]) -> None:
        """Finished ``batches`` run again (rows sent again): the job waits for them."""
        for batch in batches:
            self.state.done.pop(batch, None)

    @reopen.validator
    def _reopen_while_running(self, batches: list[str]) -> None:
        if self.closing:
            raise ValueError("the job is ending")

    @workflow.update
    async def resume(self) -> int:
        """A ``bulk run`` starts: a stopped job sends again; returns the epoch."""
        if self.state.stopped is not None:
            self.state.stopped = None
            self.state.epoch += 1
            workflow.upsert_memo({STOPPED_MEMO: None, EPOCH_MEMO: self.state.epoch})
            await self._tell_batches("resume")
        return self.state.epoch

    @workflow.query
    def describe(self) -> JobSpec:
        assert self.spec is not None
        return self.spec

    @workflow.update
    def lease(self, worker: str, rate: float, seconds: float) -> Lease:
        """A share of the job's ``rate`` for ``worker`` for ``seconds``: the
        rate split evenly between the workers whose leases run, never more
        than what the others' leases leave (a worker that joins gets its share
        as the others renew theirs, within one lease). Share 0: ask again."""
        now = workflow.now().timestamp()
        leases = self.state.leases
        for name in [name for name, held in leases.items() if held.until <= now]:
            del leases[name]
        leases.pop(worker, None)
        fair = rate / (len(leases) + 1)
        free = rate - sum(held.share for held in leases.values())
        granted = Lease(share=max(0.0, min(fair, free)), until=now + seconds)
        if seconds > 0:
            # Kept at 0 too: the others' next renewals make room for this worker.
            leases[worker] = granted
        granted.waiting = sum(1 for held in leases.values() if held.share == 0)
        return granted

    # No longer called (the rate is leased): kept so that the histories of jobs
    # run by the version before, which hold take updates, still replay.
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
        self.stopped = False
        self.closing = False
        self.batch: Batch | None = None
        # Rounds of rows being sent and answered: the first, and one per resend.
        self.rounds: set[asyncio.Task[None]] = set()
        # The DONE_MEMO keys written so far.
        self.published = 0

    @workflow.run
    async def run(self, batch: Batch) -> list[Row]:
        self.rows = batch.rows
        self.batch = batch
        self._publish(self.rows)
        self._start_round([row for row in self.rows if row.state == RowState.QUEUED])
        while self.rounds:
            # A round's failure fails the workflow task, as it would in the run itself.
            await asyncio.gather(*self.rounds)
        # From here the batch ends: no row is queued again (see resend's validator).
        self.closing = True
        job = workflow.get_external_workflow_handle(job_workflow_id(batch.job))
        done = [workflow.info().workflow_id, counts_of(self.rows)]
        # A job already closed (rows sent again after it finished) needs no word.
        with contextlib.suppress(FailureError):
            await job.signal("batch_done", args=done)
        return self.rows

    @workflow.query
    def snapshot(self) -> list[Row]:
        return self.rows

    def _publish(self, changed: list[Row], *, anew: bool = False) -> None:
        """Record the batch's counts, and those of ``changed`` that are final,
        in the memo (a job that ran before this replays without it). ``anew``:
        rows left a final state (sent again): the finished rows are written
        again under one key, the earlier keys removed."""
        if not workflow.patched(_PROGRESS_PATCH):
            return
        memo: dict[str, Any] = {COUNTS_MEMO: counts_of(self.rows)}
        if anew:
            memo.update({f"{DONE_MEMO}{index}": None for index in range(self.published)})
            changed = self.rows
        finished = [dataclasses.asdict(row) for row in changed if row.state in FINAL_STATES]
        if finished:
            memo[f"{DONE_MEMO}{self.published}"] = finished
            self.published += 1
        workflow.upsert_memo(memo)

    def _start_round(self, rows: list[Row]) -> None:
        """Send ``rows`` (queued), then wait for their answers, beside any
        other round: rows queued again are sent at once, not after the
        answers the batch already waits for."""
        round_ = asyncio.create_task(self._round(rows))
        self.rounds.add(round_)
        round_.add_done_callback(self.rounds.discard)

    async def _round(self, rows: list[Row]) -> None:
        assert self.batch is not None
        batch = self.batch
        size = batch.send_group
        groups = [rows[index : index + size] for index in range(0, len(rows), size)]
        if not workflow.patched(_PIPELINE_PATCH):
            # As a job started before the pipeline did: answers once all are sent.
            await asyncio.gather(*(self._send(batch, group) for group in groups))
            sent = [row for row in rows if row.state == RowState.SENT]
            if sent:
                await self._answers(batch, sent)
            return
        # Rows are waited on as their groups are sent, in waves: a wave's
        # answers activity takes every row sent since the last wave began,
        # once that wave's first activity is back (few activities per batch,
        # and polls overlap the batch's later sends).
        pending: list[Row] = []
        sending = len(groups)

        async def send(group: list[Row]) -> None:
            nonlocal sending
            await self._send(batch, group)
            pending.extend(row for row in group if row.state == RowState.SENT)
            sending -= 1

        def back_or_all_sent(first_back: asyncio.Event) -> bool:
            return first_back.is_set() or sending == 0

        async def answer() -> None:
            waves: list[asyncio.Task[None]] = []
            # The batch's last rows are waited on as soon as they are sent, not
            # once the wave before is back: a job's end waits for its last
            # batch's last wave (a job started before this waits as it did).
            last_at_once = workflow.patched(_LAST_WAVE_PATCH)
            while True:
                await workflow.wait_condition(lambda: bool(pending) or sending == 0)
                if not pending:
                    break
                wave = list(pending)
                pending.clear()
                first_back = asyncio.Event()
                waves.append(asyncio.create_task(self._answers(batch, wave, first_back)))
                if last_at_once:
                    await workflow.wait_condition(functools.partial(back_or_all_sent, first_back))
                else:
                    await first_back.wait()
            await asyncio.gather(*waves)

        await asyncio.gather(*(send(group) for group in groups), answer())

    @workflow.update
    def resend(self, resend_unknown: bool, resend_failed: bool) -> int:
        """Queue again the rows ``--resend-unknown``/``--resend-failed`` ask
        for (none is in flight: a row is unknown or failed once its send is
        over); return how many."""
        again = [
            row
            for row in self.rows
            if is_resent(
                row.state,
                row.request_id,
                resend_unknown=resend_unknown,
                resend_failed=resend_failed,
            )
        ]
        for row in again:
            row.state, row.result = RowState.QUEUED.value, {}
        if again:
            self._publish([], anew=True)
            self._start_round(again)
        return len(again)

    @resend.validator
    def _resend_while_running(self, resend_unknown: bool, resend_failed: bool) -> None:
        if self.closing:
            raise ValueError("the batch is ending")

    @workflow.signal(name="stop")
    def stop(self) -> None:
        self.stopped = True

    @workflow.signal(name="resume")
    def resume(self) -> None:
        self.stopped = False

    async def _send(self, batch: Batch, group: list[Row]) -> None:
        while group:
            # A stopped job's rows stay queued until it is resumed.
            await workflow.wait_condition(lambda: not self.stopped)
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
            except ActivityError as err:
                # The worker died, or the activity timed out, its requests
                # maybe written: all but those it said it would not send.
                unsent = _unsent_lines(err)
                for row in group:
                    if row.line in unsent:
                        row.state = RowState.QUEUED
                    else:
                        row.state = RowState.UNKNOWN
                        row.result = {"reason": IN_FLIGHT_REASON}
                self._publish(group)
                group = [row for row in group if row.state == RowState.QUEUED]
                continue
            by_line = {row.line: row for row in group}
            stopped: SendOutcome | None = None
            for outcome in outcomes:
                row = by_line[outcome.line]
                row.state = outcome.state
                row.request_id = outcome.request_id
                row.sent_at = outcome.sent_at
                row.result = outcome.result
                if outcome.stopped is not None:
                    stopped = outcome
            self._publish(group)
            if stopped is not None:
                # The job stops every batch, this one included.
                job = workflow.get_external_workflow_handle(job_workflow_id(batch.job))
                with contextlib.suppress(FailureError):
                    await job.signal("stop", args=[stopped.stopped, stopped.epoch])
            # Rows a stopping worker did not write go again, to any worker.
            group = [row for row in group if row.state == RowState.QUEUED]

    async def _answers(
        self, batch: Batch, sent: list[Row], first_back: asyncio.Event | None = None
    ) -> None:
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
            self._publish([by_line[answer.line] for answer in answers])
            if first_back is not None:
                first_back.set()
            waiting = [row for row in waiting if row.state == RowState.SENT]


@workflow.defn(name="verif-client.ids")
class IdsWorkflow:
    """The request ids the service gave the rows of a job (those whose value
    falls in this shard), each with the line it was given to first."""

    @workflow.init
    def __init__(self, lines: dict[str, int]) -> None:
        self.lines = dict(lines)
        self.closing = False

    @workflow.run
    async def run(self, lines: dict[str, int]) -> dict[str, int]:
        await workflow.wait_condition(
            lambda: (
                self.closing or workflow.info().get_current_history_length() > _JOB_HISTORY_LIMIT
            )
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        if not self.closing:
            workflow.continue_as_new(self.lines)
        return self.lines

    @workflow.update
    def claim(self, rows: list[Claimed]) -> list[int]:
        """Record each row's id unless another row has it; return the line
        that holds each (the row's own, or the other's)."""
        return [self.lines.setdefault(str(row.request_id), row.line) for row in rows]

    @workflow.signal
    def close(self) -> None:
        """The job is over: return the ids (a rerun starts the shard again with them)."""
        self.closing = True
