"""The activities a Temporal worker runs for a job: sends and answers.

A send activity sends its rows (10 to 50) at most once each, with this process's
:class:`VerificationClient` (its credentials come from this process's
environment and never enter Temporal). An answers activity claims its rows'
request ids (``_temporal_ids``), then waits for their outcomes in the
worker's own poll stream (one per polling setting: no activity per poll), and
returns as they come, heartbeating what it has so that a retry on another
worker polls only the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Final

import anyio
import anyio.abc
import attrs

# Imported only through _temporal, whose import of temporalio says in one line
# when the extra is missing.
import temporalio.client
import temporalio.exceptions
from temporalio import activity

from .._client import VerificationClient
from .._errors import (
    AuthenticationError,
    HTTPStatusError,
    RequestValidationError,
    VerifClientError,
)
from .._operations import SEND_CONFIRMATION_SMS
from .._polling import LocationOutcome, PollStream, VerificationOutcome
from .._pollpolicy import PollPolicy
from .._slots import Slots
from .._terminal import safe
from ._job import RowState
from ._outcomes import merge_outcome, outcome_of_failure
from ._runner import (
    IN_FLIGHT_STOP_REASON,
    reused_id_reason,
    send_until_accepted,
    stop_message,
    stops_the_job,
)
from ._temporal_capacity import ANSWERS_ROUNDS, AnswersCapacity, SendCapacity
from ._temporal_ids import IdClaims
from ._temporal_outage import is_transient, persist
from ._workflows import (
    ANSWERS_ACTIVITY,
    EPOCH_MEMO,
    MAX_SEND_GROUP,
    SEND_ACTIVITY,
    SEND_GROUP,
    STOPPED_MEMO,
    Answer,
    AnswersRequest,
    Awaited,
    Claimed,
    JobSpec,
    Polling,
    SendOutcome,
    SendProgress,
    SendRequest,
    ToSend,
    id_shards,
    job_workflow_id,
)

_SEND: Final = SEND_CONFIRMATION_SMS
_ANSWER_LINGER: Final = 2.0
# How often a run, and a worker's sends, read whether the job was stopped
# (the job's memo: no query). A read costs about 2 ms of CPU, most of it the
# server's, for every worker of the job; a send that misses a stop by a second
# meets the refusal that stopped the job and hands its row back, queued.
STOP_WATCH_SECONDS: Final = 1.0
_RECORDS_KEPT: Final = 100
_UNCHECKED_ID: Final = (
    "the SMS was sent, but its request id could not be recorded in the job's record to check "
    "that no other row has it, so it is not polled"
)
# A send activity resends rows the service answered 429 (not processed) this
# long at most; then hands them back, queued, well within its 10-minute limit.
_RESEND_429_SECONDS: Final = 300.0


class _PollHub:
    """One poll stream for every row this worker waits on with the same
    polling settings: the client's poller batches and paces them all."""

    def __init__(self, client: VerificationClient, polling: Polling, concurrency: int) -> None:
        self.client = client
        self.polling = polling
        self.concurrency = concurrency
        self.stream: PollStream[Any] | None = None
        # Each request id polled, with what to call when it settles (or is
        # refused): the answers activities waiting on it.
        self.waiting: dict[int, list[Callable[[], None]]] = {}
        self.partial: dict[int, dict[str, Any]] = {}
        self.settled: dict[int, tuple[str, dict[str, Any]]] = {}
        # Why the service refused this worker's polls, if it did.
        self.refused: AuthenticationError | None = None

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        polling = self.polling
        policy = PollPolicy(
            initial_delay=polling.initial_delay,
            multiplier=polling.multiplier,
            max_delay=polling.max_delay,
            jitter=polling.jitter,
            timeout=polling.deadline,
            false_means=polling.false_means,  # type: ignore[arg-type]
        )
        poll = (
            self.client.poll_verifications_and_locations
            if polling.location
            else self.client.poll_verifications
        )
        async with poll(policy=policy, keep_open=True, max_concurrency=self.concurrency) as stream:
            self.stream = stream
            task_status.started()
            async for outcome in stream:
                self._settle(outcome)

    def _settle(self, outcome: VerificationOutcome | LocationOutcome) -> None:
        if isinstance(outcome.error, AuthenticationError):
            # This worker's credentials, not the row's fate: the row is not
            # settled here, and its wait goes to another worker (answer).
            self.partial.pop(outcome.request_id, None)
            self.refused = outcome.error
            self._tell(outcome.request_id)
            return
        part = self.partial.setdefault(outcome.request_id, {})
        settled = merge_outcome(part, outcome, location=self.polling.location)
        if settled is None:
            return
        del self.partial[outcome.request_id]
        state, result = settled
        self.settled[outcome.request_id] = (state.value, result)
        self._tell(outcome.request_id)

    def _tell(self, request_id: int) -> None:
        for heard in self.waiting.pop(request_id, ()):
            heard()

    def watch(self, awaited: Awaited, heard: Callable[[], None]) -> None:
        """Call ``heard`` once ``awaited``'s row settles or its poll is
        refused (at once if it has settled): see ``answer``. A callback, not
        a task per row: anyio's ``start_soon`` costs some 45 µs a task."""
        request_id = awaited.request_id
        if request_id in self.settled:
            heard()
            return
        listeners = self.waiting.get(request_id)
        if listeners is None:
            # A row is polled once per worker, however often its wait is retried.
            listeners = self.waiting[request_id] = []
            assert self.stream is not None
            now = time.time()
            left = self.polling.deadline - (now - awaited.sent_at)
            first = first_poll_in(self.polling, awaited, now)
            self.stream.add(request_id, timeout=max(0.0, left), first_poll_in=first)
        listeners.append(heard)

    def unwatch(self, awaited: Awaited, heard: Callable[[], None]) -> None:
        """``heard`` is not to be called: its wait is over (the row stays
        polled, for a retry of the wait to find settled)."""
        with contextlib.suppress(KeyError, ValueError):  # heard of already
            self.waiting[awaited.request_id].remove(heard)

    def answer(self, awaited: Awaited) -> Answer:
        """The answer of a row ``watch`` heard of; raises ``_Refused`` if its
        poll was refused for this worker's credentials."""
        settled = self.settled.get(awaited.request_id)
        if settled is None:
            raise _Refused(f"the service refused this worker's credentials ({self.refused})")
        state, result = settled
        return Answer(awaited.line, state, result)


def first_poll_in(polling: Polling, awaited: Awaited, now: float) -> float:
    """Seconds from ``now`` (``time.time()``) to the first poll of ``awaited``'s
    row: counted from its SMS, as the policy means, not from the start of the
    wait (which follows the send by a workflow task and more); never later
    than the policy's own delay from now, whatever the sending worker's clock
    said."""
    since_sent = now - awaited.sent_at
    return max(0.0, min(polling.initial_delay, polling.initial_delay - since_sent))


class _Refused(Exception):
    """A poll refused for this worker's credentials: the row's wait is any
    other worker's to take, not this one's to settle."""


class _Stopping(Exception):
    """The worker is shutting down, or the job stops: a request not yet
    written is not written."""


@attrs.frozen(slots=True)
class Record:
    """What a send activity reads of its job first: the job as loaded, why it
    stopped (None: it runs) and how often it was resumed after a stop."""

    spec: JobSpec
    stopped: str | None
    epoch: int
    running: bool

    @classmethod
    async def read(cls, temporal: temporalio.client.Client, job: str) -> Record:
        # The memo is the server's record: no worker needs to answer.
        description = await temporal.get_workflow_handle(job_workflow_id(job)).describe()
        spec: JobSpec = await description.memo_value("spec", type_hint=JobSpec)
        stopped: str | None = await description.memo_value(STOPPED_MEMO, None, type_hint=str)
        epoch: int = await description.memo_value(EPOCH_MEMO, 0, type_hint=int)
        running = description.status == temporalio.client.WorkflowExecutionStatus.RUNNING
        return cls(spec, stopped, epoch, running)


@contextlib.asynccontextmanager
async def _heartbeating(every: float, details: Callable[[], Iterable[Any]]) -> AsyncIterator[None]:
    """Heartbeat while the body runs: a dead worker's activity times out soon."""

    async def beat() -> None:
        while True:
            # Not at once: a short activity sends no heartbeat at all.
            await anyio.sleep(every)
            activity.heartbeat(*details())

    async with anyio.create_task_group() as tg:
        tg.start_soon(beat)
        yield
        tg.cancel_scope.cancel()


class Activities:
    def __init__(
        self,
        temporal: temporalio.client.Client,
        client: VerificationClient,
        concurrency: int,
        heartbeat: float,
        group: int | None = None,
    ) -> None:
        self.temporal = temporal
        self.claims = IdClaims(temporal)
        self.client = client
        self.concurrency = concurrency
        self.beat = heartbeat / 4
        # --concurrency: the SMS requests of this worker in flight at once.
        self.sending = Slots(concurrency)
        # When the worker fetches a send activity: once all its rows can go
        # (``group``: the job's rows per send activity, when it serves one job).
        self.capacity = SendCapacity(concurrency, MAX_SEND_GROUP, group=group)
        self.hubs: dict[tuple[Any, ...], _PollHub] = {}
        # When it fetches an answers activity: while its polls keep up.
        self.answering = AnswersCapacity(self.backlog, ANSWERS_ROUNDS * concurrency)
        self.task_group: anyio.abc.TaskGroup | None = None
        self._hub_lock = anyio.Lock()
        # Jobs stopped by what this worker's sends met, with the job's epoch then.
        self.stops: dict[str, int] = {}
        self.anything_sent = False
        # Each job's record as last read, with time.monotonic() then.
        self.records: dict[str, tuple[float, Record]] = {}

    def backlog(self) -> int:
        """The polls of this worker that are due and wait for a connection."""
        return sum(hub.stream.due for hub in self.hubs.values() if hub.stream is not None)

    @activity.defn(name=SEND_ACTIVITY)
    async def send(self, request: SendRequest) -> list[SendOutcome]:
        units = self.capacity.claim(len(request.rows))
        # Rows this worker has no room to send at once go back unsent, to any
        # worker: a row a worker holds is a row in flight, so that its death
        # makes `unknown` only what it may have sent. A worker of less than
        # SEND_GROUP (the smallest group) sends them all through its limit,
        # as before: handing back all but one row of each activity would
        # make an activity per row.
        whole = self.concurrency < SEND_GROUP
        room = len(request.rows) if whole else units.units
        now, later = request.rows[:room], request.rows[room:]
        progress = SendProgress(unsent=[row.line for row in later])

        def row_done() -> None:
            # A small worker's room comes back with the whole activity: one at a time.
            if not whole:
                self.capacity.give_back(units, 1)

        try:
            outcomes = await self._send(request.job, now, progress, row_done)
        finally:
            self.capacity.give_back(units, units.units)
        return outcomes + [SendOutcome(row.line, RowState.QUEUED) for row in later]

    async def _send(
        self,
        job: str,
        rows: list[ToSend],
        progress: SendProgress,
        row_done: Callable[[], None],
    ) -> list[SendOutcome]:
        if not rows:
            return []
        if progress.unsent:
            # Held by the server before anything is sent: if this worker
            # dies, its batch sends these again instead of recording them
            # unknown. (A heartbeat is a billable action: only when needed.)
            heartbeat = self.temporal.get_async_activity_handle(
                task_token=activity.info().task_token
            ).heartbeat
            await persist(functools.partial(heartbeat, progress), "starting sends")
        record = await self._record(job)
        if self._stopped(job, record):
            # Back, unsent: the job's word to stop is on its way to the batch.
            return [SendOutcome(row.line, RowState.QUEUED) for row in rows]
        outcomes: dict[int, SendOutcome] = {}
        written: set[int] = set()
        ends_resending = time.monotonic() + _RESEND_429_SECONDS

        async def send_one(row: ToSend) -> None:
            # Without waiting when there is room (as there is for every row of
            # an activity fetched for its room): anyio's limiter yielded to
            # the loop twice a row, 6 % of a worker's CPU in a send-bound job.
            if not self.sending.take_now():
                await self.sending.take()
            try:
                outcomes[row.line] = await self._send_one(
                    job, record.epoch, row, written, ends_resending
                )
            finally:
                self.sending.release()
            # Its room goes to the next activity while this one still sends.
            row_done()

        try:
            # asyncio's tasks, not anyio's: the SDK runs activities on asyncio
            # only, and anyio's start_soon costs some 45 µs a task against
            # asyncio's 8 (a row's SMS is about 300 µs of CPU).
            async with _heartbeating(self.beat, lambda: (progress,)), asyncio.TaskGroup() as tg:
                for row in rows:
                    tg.create_task(send_one(row))
            # The outcomes reach the workflow only through the server: wait
            # for it here (an outage), not in the SDK's bounded retries.
            await persist(self._reachable, "reporting sends")
        except anyio.get_cancelled_exc_class():
            # The worker stops for good (its grace is over): a request written
            # may have been sent; one not written goes back, to any worker.
            for row in rows:
                if row.line in written and row.line not in outcomes:
                    reason = {"reason": IN_FLIGHT_STOP_REASON}
                    outcomes[row.line] = SendOutcome(row.line, RowState.UNKNOWN, result=reason)
                elif row.line not in outcomes:
                    outcomes[row.line] = SendOutcome(row.line, RowState.QUEUED)
        return list(outcomes.values())

    async def _reachable(self) -> None:
        await self.temporal.service_client.check_health()

    async def _record(self, job: str) -> Record:
        """The job's record, read again at most every 1.5 * STOP_WATCH_SECONDS
        while it runs (the memo holds the job's spec: a large job's is tens
        of kilobytes), and every time while it is stopped."""
        now = time.monotonic()
        cached = self.records.get(job)
        # A little over the watch's period: a `bulk run` process's own stop
        # watch keeps this fresh (see remember), so its sends read nothing.
        fresh = cached is not None and now - cached[0] < 1.5 * STOP_WATCH_SECONDS
        if cached is not None and fresh and cached[1].stopped is None:
            return cached[1]
        try:
            record = await Record.read(activity.client(), job)
        except Exception as exc:
            if not is_transient(exc):
                raise
            if cached is None:
                # Nothing written yet: wait for the server rather than fail the rows.
                record = await persist(
                    functools.partial(Record.read, activity.client(), job), "reading the job"
                )
            else:
                return cached[1]  # the server is busy: what was read last will do
        if len(self.records) > _RECORDS_KEPT:
            self.records.clear()  # a long-lived worker serving many jobs
        self.records[job] = (now, record)
        return record

    def remember(self, job: str, record: Record) -> None:
        """``job``'s record as just read by another part of this process."""
        self.records[job] = (time.monotonic(), record)

    def _stopped(self, job: str, record: Record) -> bool:
        """Whether ``job`` stops, as its record or this worker (which may have
        seen it first) knows; a stop this worker saw before the job was last
        resumed is over."""
        seen = self.stops.get(job)
        if seen is not None and record.epoch > seen:
            del self.stops[job]
            seen = None
        return record.stopped is not None or seen is not None

    async def _send_one(
        self, job: str, epoch: int, row: ToSend, written: set[int], ends_resending: float
    ) -> SendOutcome:
        async def mark_written() -> None:
            # After the rate limit let it go: a stop before this leaves the row queued.
            if activity.is_worker_shutdown() or job in self.stops:
                raise _Stopping
            written.add(row.line)

        def stopping() -> bool:
            return (
                activity.is_worker_shutdown()
                or job in self.stops
                or time.monotonic() > ends_resending
            )

        params = _SEND.wire_params(row.phone_number, row.question)
        try:
            # A 429 was refused, not processed: while its resend waits for the
            # Retry-After, the row is not in flight (a stop then hands it back).
            sent = await send_until_accepted(
                self.client,
                params,
                mark_written,
                stopping=stopping,
                refused=lambda: written.discard(row.line),
            )
        except _Stopping:
            return SendOutcome(row.line, RowState.QUEUED.value)
        except RequestValidationError as exc:
            return SendOutcome(row.line, RowState.INVALID.value, result={"reason": str(exc)})
        except VerifClientError as exc:
            why = stops_the_job(exc, self.anything_sent)
            if why is not None:
                self.stops.setdefault(job, epoch)
                message = stop_message(why, exc)
                return SendOutcome(row.line, RowState.QUEUED.value, stopped=message, epoch=epoch)
            if isinstance(exc, HTTPStatusError) and exc.status_code == 429:
                # Refused, not processed: it goes back, to be sent again.
                return SendOutcome(row.line, RowState.QUEUED.value)
            state = outcome_of_failure(exc, written=row.line in written)
            return SendOutcome(row.line, state.value, result={"reason": str(exc)})
        if not sent.ok:
            reason = {"reason": sent.error_message or "request id 0"}
            return SendOutcome(row.line, RowState.FAILED.value, result=reason)
        self.anything_sent = True
        return SendOutcome(row.line, RowState.SENT.value, sent.request_id, time.time())

    @activity.defn(name=ANSWERS_ACTIVITY)
    async def answers(self, request: AnswersRequest) -> list[Answer]:
        # What an earlier attempt (on a worker that died) had already settled.
        known = {
            answer["line"]: Answer(**answer)
            for details in activity.info().heartbeat_details[-1:]
            for answer in details
        }
        hub = await self._hub(request.polling)
        # A retry that starts from answers it already has returns them first.
        waiting = [] if known else await self._claimed(request, known)

        # Back to the workflow once every row is answered, or _ANSWER_LINGER
        # seconds after the first answer, so that answered rows are recorded
        # without waiting for the slowest: a round records at least one row,
        # however long its rows wait. (Returning at half the rows cost a
        # second poll of the other half: their next round usually lands on
        # another worker, whose stream polls them anew.)
        left = len(waiting)
        answered = anyio.Event()  # the first row's answer, or a refusal
        complete = anyio.Event()  # every row's, or a refusal
        refused: list[str] = []

        def listener(awaited: Awaited) -> Callable[[], None]:
            def heard() -> None:
                nonlocal left
                try:
                    known[awaited.line] = hub.answer(awaited)
                except _Refused as exc:
                    refused.append(str(exc))
                    complete.set()
                else:
                    left -= 1
                    if not left:
                        complete.set()
                answered.set()

            return heard

        def details() -> tuple[list[dict[str, Any]]]:
            return ([dataclasses.asdict(answer) for answer in known.values()],)

        async with _heartbeating(self.beat, details), anyio.create_task_group() as outer:
            outer.start_soon(self._stop_on_shutdown, outer.cancel_scope)
            if not known:
                heard = [(awaited, listener(awaited)) for awaited in waiting]
                try:
                    for awaited, then in heard:
                        hub.watch(awaited, then)
                    await answered.wait()
                    with anyio.move_on_after(_ANSWER_LINGER):
                        await complete.wait()
                finally:
                    for awaited, then in heard:
                        hub.unwatch(awaited, then)
            outer.cancel_scope.cancel()
        if not known:
            # Retried by another worker, which starts from the heartbeat's
            # answers. Benign: the SDK logs no traceback of it.
            raise temporalio.exceptions.ApplicationError(
                refused[0] if refused else "the worker is stopping",
                category=temporalio.exceptions.ApplicationErrorCategory.BENIGN,
            )
        return [known[awaited.line] for awaited in request.rows if awaited.line in known]

    async def _claimed(self, request: AnswersRequest, known: dict[int, Answer]) -> list[Awaited]:
        """The rows to poll: those whose request id is their own. A row whose
        id another row of the job holds is answered ``unknown`` (into
        ``known``) and never polled: its answer might be the other row's."""
        spec = (await self._record(request.job)).spec
        rows = [awaited for awaited in request.rows if awaited.line not in known]
        claims = [Claimed(awaited.line, awaited.request_id) for awaited in rows]
        # The claims are needed by the first of these rows' polls, not before.
        now = time.time()
        needed_in = min((first_poll_in(request.polling, row, now) for row in rows), default=0.0)
        try:
            # Temporal away or busy is waited out in there; this is what is left.
            holders = await self.claims.holders(
                spec.job, spec.task_queue, id_shards(spec.rows), claims, needed_in
            )
        except Exception as exc:
            # The job's record refuses the ids for good (its workflow closed
            # under it): an answer to an id not checked could be another row's.
            reason = {"reason": f"{_UNCHECKED_ID} ({type(exc).__name__}: {safe(str(exc))})"}
            for awaited in rows:
                known[awaited.line] = Answer(awaited.line, RowState.UNKNOWN.value, reason)
            return []
        waiting = []
        for awaited in rows:
            holder = holders[awaited.line]
            if holder == awaited.line:
                waiting.append(awaited)
            else:
                reason = {"reason": reused_id_reason(awaited.request_id, holder)}
                known[awaited.line] = Answer(awaited.line, RowState.UNKNOWN.value, reason)
        return waiting

    async def _stop_on_shutdown(self, scope: anyio.CancelScope) -> None:
        await activity.wait_for_worker_shutdown()
        scope.cancel()

    async def _hub(self, polling: Polling) -> _PollHub:
        key = dataclasses.astuple(polling)
        async with self._hub_lock:
            hub = self.hubs.get(key)
            if hub is None:
                assert self.task_group is not None
                hub = self.hubs[key] = _PollHub(self.client, polling, self.concurrency)
                await self.task_group.start(hub.run)
        return hub
