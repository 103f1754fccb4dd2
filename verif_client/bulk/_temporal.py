"""Bulk jobs on Temporal: any number of workers on any number of machines.

``temporal://HOST:PORT/NAMESPACE?job=ID`` names a job. Every ``bulk run``
started with it loads the input if it is the first (loading is idempotent:
the workflows' ids derive from the job and its rows), runs a Temporal worker
for the job and returns when every row has its outcome. The workflows (see
``_workflows``) hold the rows; this module is the worker side: the send and
answers activities, which use this process's :class:`VerificationClient` (its
credentials come from this process's environment and never enter Temporal),
and the job-wide rate limiter.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import math
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, urlsplit

import anyio
import anyio.abc
import attrs

from .._client import VerificationClient
from .._codec import Codec
from .._errors import HTTPStatusError, RequestValidationError, VerifClientError
from .._operations import SEND_CONFIRMATION_SMS
from .._polling import LocationOutcome, PollStream, VerificationOutcome
from .._pollpolicy import PollPolicy
from .._terminal import safe
from ._input import (
    BulkInputError,
    different_question_error,
    digest,
    question_digest,
    read_input,
)
from ._job import ALL_STATES, FINAL_STATES, BulkOptions, InputRow, JobRow, RowState, is_resent
from ._journal import JournalError, different_input_error
from ._outcomes import merge_outcome, outcome_of_failure
from ._runner import (
    IN_FLIGHT_STOP_REASON,
    JobStoppedError,
    Progress,
    Stopper,
    library_error_unwrapped,
    reused_id_reason,
    send_until_accepted,
    stop_message,
    stops_the_job,
    write_rows,
)

if TYPE_CHECKING:
    from ._open import JobRun

try:
    import temporalio.api.workflowservice.v1
    import temporalio.client
    import temporalio.common
    import temporalio.converter
    import temporalio.exceptions
    import temporalio.service
    import temporalio.worker
    from temporalio import activity
except ImportError:  # pragma: no cover - depends on the installed extras
    raise JournalError(
        "a temporal:// journal needs temporalio: pip install 'verif-client[temporal]'"
    ) from None

from ._sealed import UnsealedCodec, codec_from_environment, sealed_task_queue
from ._temporal_ids import IdClaims
from ._temporal_outage import is_transient, persist, quiet_runtime
from ._temporal_rate import LeasedRate
from ._workflows import (
    ANSWERS_ACTIVITY,
    ANSWERS_QUEUE_SUFFIX,
    COUNTS_MEMO,
    DONE_MEMO,
    EPOCH_MEMO,
    LOADED_MEMO,
    SEND_ACTIVITY,
    SEND_GROUP,
    STOPPED_MEMO,
    Answer,
    AnswersRequest,
    Awaited,
    Batch,
    Claimed,
    IdsWorkflow,
    JobSpec,
    JobState,
    JobWorkflow,
    Lease,
    Polling,
    Row,
    RowsWorkflow,
    SendOutcome,
    SendRequest,
    ToSend,
    counts_of,
    id_shards,
    ids_workflow_id,
    job_workflow_id,
    rows_workflow_id,
)

SCHEME: Final = "temporal://"
API_KEY_VARIABLE: Final = "TEMPORAL_API_KEY"
DEFAULT_TASK_QUEUE: Final = "verif-client"
_SEND: Final = SEND_CONFIRMATION_SMS
_PARAMETERS: Final = frozenset({"job", "task_queue", "tls", "heartbeat", "batch"})
# Seconds of silence after which a worker's activities are given up. A server
# outage counts as silence (its timers run from the last heartbeat it stored),
# so this is also how long an outage a send in flight survives, less a
# quarter (heartbeats reach the server every quarter of it): 45 s.
DEFAULT_HEARTBEAT: Final = 60
# The display's counts are read at most this often (and less often for a job
# whose batches take long to list).
_PROGRESS_SECONDS: Final = 2.0
_ANSWER_LINGER: Final = 2.0
# How often a run, and a worker's sends, read whether the job was stopped
# (the job's memo: no query).
_STOP_WATCH_SECONDS: Final = 0.5
_RECORDS_KEPT: Final = 100
_UNCHECKED_ID: Final = (
    "the SMS was sent, but its request id could not be recorded in the job's record to check "
    "that no other row has it, so it is not polled"
)
# `bulk status` and `bulk export` wait this long for a server that is away.
_READ_PATIENCE: Final = 60.0
# The SDK's own retries of a call to the server (an activity's completion
# among them) last this long: a server away for longer than its default 10 s
# must not lose a send's outcome.
_RETRY: Final = temporalio.service.RetryConfig(
    max_interval_millis=5_000, max_elapsed_time_millis=600_000, max_retries=1_000
)
# A send activity resends rows the service answered 429 (not processed) this
# long at most; then hands them back, queued, well within its 10-minute limit.
_RESEND_429_SECONDS: Final = 300.0


def is_temporal(location: str) -> bool:
    return location.startswith(SCHEME)


@attrs.frozen(slots=True)
class Location:
    """A parsed ``temporal://HOST:PORT/NAMESPACE?...`` (see docs/fleet.md)."""

    target: str
    namespace: str
    job: str | None
    task_queue: str | None
    tls: bool
    heartbeat: float
    batch: int

    @classmethod
    def parse(cls, location: str) -> Location:
        def fail(problem: str) -> JournalError:
            return JournalError(f"--journal {safe(location)}: {problem}")

        parts = urlsplit(location)
        if parts.scheme != "temporal" or not parts.hostname or parts.port is None:
            raise fail("expected temporal://HOST:PORT/NAMESPACE?job=ID")
        if parts.username or parts.password:
            raise fail(f"no credentials in the URL: the API key is read from {API_KEY_VARIABLE}")
        namespace = parts.path.strip("/") or "default"
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        unknown = sorted(set(params) - _PARAMETERS)
        if unknown:
            raise fail(
                f"unknown parameter {unknown[0]!r} (known: {', '.join(sorted(_PARAMETERS))})"
            )
        try:
            heartbeat = float(params.get("heartbeat", str(DEFAULT_HEARTBEAT)))
            batch = int(params.get("batch", "100"))
        except ValueError as exc:
            raise fail(str(exc)) from None
        if not (heartbeat > 0 and 1 <= batch <= 1000):
            raise fail("heartbeat must be > 0 seconds and batch from 1 to 1000 rows")
        tls = params.get("tls", "false").lower()
        if tls not in ("true", "false", "1", "0"):
            raise fail("tls must be true or false")
        return cls(
            target=f"{parts.hostname}:{parts.port}",
            namespace=namespace,
            job=params.get("job") or None,
            task_queue=params.get("task_queue") or None,
            tls=tls in ("true", "1"),
            heartbeat=heartbeat,
            batch=batch,
        )

    def where(self) -> str:
        return f"temporal://{self.target}/{self.namespace}"


async def connect(location: Location) -> temporalio.client.Client:
    codec = codec_from_environment()
    converter = temporalio.converter.DataConverter.default
    if codec is not None:
        # Sealed failures too: an error message could quote a row.
        converter = dataclasses.replace(
            converter,
            payload_codec=codec,
            failure_converter_class=temporalio.converter.DefaultFailureConverterWithEncodedAttributes,
        )
    else:
        # A sealed payload read without the key: one line naming it, not a KeyError.
        converter = dataclasses.replace(converter, payload_codec=UnsealedCodec())
    api_key = os.environ.get(API_KEY_VARIABLE) or None
    try:
        return await temporalio.client.Client.connect(
            location.target,
            namespace=location.namespace,
            api_key=api_key,
            tls=location.tls,
            data_converter=converter,
            retry_config=_RETRY,
            runtime=quiet_runtime(),
        )
    except RuntimeError as exc:
        raise JournalError(f"{location.where()}: cannot connect ({str(exc).strip()})") from None


def _polling(options: BulkOptions) -> Polling:
    policy = options.policy
    return Polling(
        location=options.location,
        deadline=options.deadline,
        false_means=policy.false_means,
        initial_delay=policy.initial_delay,
        multiplier=policy.multiplier,
        max_delay=policy.max_delay,
        jitter=policy.jitter,
    )


def _job_row(row: Row) -> JobRow:
    return JobRow(
        row.line,
        row.user_id,
        row.phone_number,
        row.question,
        RowState(row.state),
        row.request_id,
        row.sent_at,
        row.result,
    )


class _PollHub:
    """One poll stream for every row this worker waits on with the same
    polling settings: the client's poller batches and paces them all."""

    def __init__(self, client: VerificationClient, polling: Polling, concurrency: int) -> None:
        self.client = client
        self.polling = polling
        self.concurrency = concurrency
        self.stream: PollStream[Any] | None = None
        self.waiting: dict[int, anyio.Event] = {}
        self.partial: dict[int, dict[str, Any]] = {}
        self.settled: dict[int, tuple[str, dict[str, Any]]] = {}

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
        part = self.partial.setdefault(outcome.request_id, {})
        settled = merge_outcome(part, outcome, location=self.polling.location)
        if settled is None:
            return
        del self.partial[outcome.request_id]
        state, result = settled
        self.settled[outcome.request_id] = (state.value, result)
        event = self.waiting.pop(outcome.request_id, None)
        if event is not None:
            event.set()

    async def answer(self, awaited: Awaited) -> Answer:
        if awaited.request_id not in self.settled:
            event = self.waiting.get(awaited.request_id)
            if event is None:
                # A row waited on once per worker, however often its wait is retried.
                event = self.waiting[awaited.request_id] = anyio.Event()
                assert self.stream is not None
                left = self.polling.deadline - (time.time() - awaited.sent_at)
                self.stream.add(awaited.request_id, timeout=max(0.0, left))
            await event.wait()
        state, result = self.settled[awaited.request_id]
        return Answer(awaited.line, state, result)


class _Stopping(Exception):
    """The worker is shutting down, or the job stops: a request not yet
    written is not written."""


@attrs.frozen(slots=True)
class _Record:
    """What a send activity reads of its job first: the job as loaded, why it
    stopped (None: it runs) and how often it was resumed after a stop."""

    spec: JobSpec
    stopped: str | None
    epoch: int
    running: bool

    @classmethod
    async def read(cls, temporal: temporalio.client.Client, job: str) -> _Record:
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


class _Activities:
    def __init__(
        self,
        temporal: temporalio.client.Client,
        client: VerificationClient,
        concurrency: int,
        heartbeat: float,
    ) -> None:
        self.temporal = temporal
        self.claims = IdClaims(temporal)
        self.client = client
        self.concurrency = concurrency
        self.beat = heartbeat / 4
        # --concurrency: the SMS requests of this worker in flight at once.
        self.sending = anyio.CapacityLimiter(concurrency)
        self.hubs: dict[tuple[Any, ...], _PollHub] = {}
        self.task_group: anyio.abc.TaskGroup | None = None
        self._hub_lock = anyio.Lock()
        # Jobs stopped by what this worker's sends met, with the job's epoch then.
        self.stops: dict[str, int] = {}
        self.anything_sent = False
        # Each job's record as last read, with time.monotonic() then.
        self.records: dict[str, tuple[float, _Record]] = {}

    @activity.defn(name=SEND_ACTIVITY)
    async def send(self, request: SendRequest) -> list[SendOutcome]:
        record = await self._record(request.job)
        if self._stopped(request.job, record):
            # Back, unsent: the job's word to stop is on its way to the batch.
            return [SendOutcome(row.line, RowState.QUEUED) for row in request.rows]
        outcomes: dict[int, SendOutcome] = {}
        written: set[int] = set()
        ends_resending = time.monotonic() + _RESEND_429_SECONDS

        async def send_one(row: ToSend) -> None:
            async with self.sending:
                outcomes[row.line] = await self._send_one(
                    request.job, record.epoch, row, written, ends_resending
                )

        try:
            async with _heartbeating(self.beat, tuple), anyio.create_task_group() as tg:
                for row in request.rows:
                    tg.start_soon(send_one, row)
            # The outcomes reach the workflow only through the server: wait
            # for it here (an outage), not in the SDK's bounded retries.
            await persist(self._reachable, "reporting sends")
        except anyio.get_cancelled_exc_class():
            # The worker stops for good (its grace is over): a request written
            # may have been sent; one not written goes back, to any worker.
            for row in request.rows:
                if row.line in written and row.line not in outcomes:
                    reason = {"reason": IN_FLIGHT_STOP_REASON}
                    outcomes[row.line] = SendOutcome(row.line, RowState.UNKNOWN, result=reason)
                elif row.line not in outcomes:
                    outcomes[row.line] = SendOutcome(row.line, RowState.QUEUED)
        return list(outcomes.values())

    async def _reachable(self) -> None:
        await self.temporal.service_client.check_health()

    async def _record(self, job: str) -> _Record:
        """The job's record, read again at most every _STOP_WATCH_SECONDS
        while it runs (the memo holds the job's spec: a large job's is tens
        of kilobytes), and every time while it is stopped."""
        now = time.monotonic()
        cached = self.records.get(job)
        fresh = cached is not None and now - cached[0] < _STOP_WATCH_SECONDS
        if cached is not None and fresh and cached[1].stopped is None:
            return cached[1]
        try:
            record = await _Record.read(activity.client(), job)
        except Exception as exc:
            if not is_transient(exc):
                raise
            if cached is None:
                # Nothing written yet: wait for the server rather than fail the rows.
                record = await persist(
                    functools.partial(_Record.read, activity.client(), job), "reading the job"
                )
            else:
                return cached[1]  # the server is busy: what was read last will do
        if len(self.records) > _RECORDS_KEPT:
            self.records.clear()  # a long-lived worker serving many jobs
        self.records[job] = (now, record)
        return record

    def _stopped(self, job: str, record: _Record) -> bool:
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
        enough = len(waiting)
        answered = anyio.Event()

        async def wait(awaited: Awaited, scope: anyio.CancelScope) -> None:
            known[awaited.line] = await hub.answer(awaited)
            answered.set()
            if len(known) >= enough:
                scope.cancel()

        async def linger(scope: anyio.CancelScope) -> None:
            await answered.wait()
            await anyio.sleep(_ANSWER_LINGER)
            scope.cancel()

        def details() -> tuple[list[dict[str, Any]]]:
            return ([dataclasses.asdict(answer) for answer in known.values()],)

        async with _heartbeating(self.beat, details), anyio.create_task_group() as outer:
            outer.start_soon(self._stop_on_shutdown, outer.cancel_scope)
            if not known:
                async with anyio.create_task_group() as waits:
                    waits.start_soon(linger, waits.cancel_scope)
                    for awaited in waiting:
                        waits.start_soon(wait, awaited, waits.cancel_scope)
            outer.cancel_scope.cancel()
        if not known:
            # Retried by another worker, which starts from the heartbeat's answers.
            raise temporalio.exceptions.ApplicationError("the worker is stopping")
        return [known[awaited.line] for awaited in request.rows if awaited.line in known]

    async def _claimed(self, request: AnswersRequest, known: dict[int, Answer]) -> list[Awaited]:
        """The rows to poll: those whose request id is their own. A row whose
        id another row of the job holds is answered ``unknown`` (into
        ``known``) and never polled: its answer might be the other row's."""
        spec = (await self._record(request.job)).spec
        rows = [awaited for awaited in request.rows if awaited.line not in known]
        claims = [Claimed(awaited.line, awaited.request_id) for awaited in rows]
        try:
            # Temporal away or busy is waited out in there; this is what is left.
            holders = await self.claims.holders(
                spec.job, spec.task_queue, id_shards(spec.rows), claims
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


def _split(rows: list[Any], firsts: list[int]) -> list[list[Any]]:
    """``rows`` (in line order) cut where each batch's first line starts."""
    batches: list[list[Any]] = [[] for _ in firsts]
    index = 0
    for row in rows:
        while index + 1 < len(firsts) and row.line >= firsts[index + 1]:
            index += 1
        batches[index].append(row)
    return batches


def _is_not_found(exc: temporalio.service.RPCError) -> bool:
    return exc.status == temporalio.service.RPCStatusCode.NOT_FOUND


class TemporalJob:
    """A job on a Temporal server (one ``job=`` of one namespace)."""

    def __init__(self, location: Location, temporal: temporalio.client.Client) -> None:
        self.location = location
        self.temporal = temporal
        self.job = location.job or ""

    @classmethod
    async def open(cls, text: str) -> TemporalJob:
        location = Location.parse(text)
        if location.job is None:
            raise JournalError(f"--journal {safe(text)}: name the job: ?job=ID")
        return cls(location, await connect(location))

    def where(self) -> str:
        return f"{self.location.where()}?job={safe(self.job)}"

    async def aclose(self) -> None:
        pass  # the SDK's client holds no resource to release

    # -- the job's record --------------------------------------------------

    def _job_handle(self) -> temporalio.client.WorkflowHandle[Any, dict[str, int]]:
        return self.temporal.get_workflow_handle_for(JobWorkflow.run, job_workflow_id(self.job))

    async def spec(self) -> JobSpec | None:
        """What the job is, as its first loader recorded it; None if no such job."""
        return (await self._described())[0]

    async def _described(self) -> tuple[JobSpec | None, bool]:
        """The job's record (None if no such job), and whether every batch of
        it was started."""
        try:
            description = await self._job_handle().describe()
        except temporalio.service.RPCError as exc:
            if _is_not_found(exc):
                return None, False
            raise JournalError(f"{self.where()}: {exc.message}") from None
        spec: JobSpec = await description.memo_value("spec", type_hint=JobSpec)
        loaded: bool = await description.memo_value(LOADED_MEMO, False, type_hint=bool)
        return spec, loaded

    async def _loaded_spec(self) -> JobSpec:
        spec = await self.spec()
        if spec is None:
            raise JournalError(f"{self.where()}: no such job")
        return spec

    async def _record(self) -> _Record:
        """The job's record; the server away or busy is raised as it is (to be waited out)."""
        try:
            return await _Record.read(self.temporal, self.job)
        except temporalio.service.RPCError as exc:
            if is_transient(exc):
                raise
            raise JournalError(f"{self.where()}: {exc.message}") from None

    async def _runs_again(self) -> bool:
        """Whether the job, seen finished, runs again (a record that cannot be read: no)."""
        try:
            return (await self._record()).running
        except JournalError:
            return False

    async def _resume(self) -> None:
        """A stopped job sends again (the job workflow tells its batches)."""
        try:
            await self._job_handle().execute_update(JobWorkflow.resume)
        except temporalio.service.RPCError as exc:
            if is_transient(exc):
                raise  # waited out by the caller
            if not _is_not_found(exc):
                raise JournalError(f"{self.where()}: {exc.message}") from None

    async def lease(self, worker: str, rate: float, seconds: float) -> Lease:
        lease: Lease = await self._job_handle().execute_update(
            JobWorkflow.lease, args=[worker, rate, seconds]
        )
        return lease

    def _check_definition(self, spec: JobSpec, identity: str, asked: str) -> None:
        """A run joins the job it names only with the job's own input and question
        (checked before any batch starts: a rerun after a crash mid-load too)."""
        if spec.input_digest != identity:
            raise _different_input(self.where())
        # A job loaded before the question was recorded has none to compare.
        if spec.question_digest and spec.question_digest != asked:
            raise JournalError(f"{self.where()}: {different_question_error()}")

    def rate_limiter(self, rate: float) -> LeasedRate:
        return LeasedRate(self.lease, rate)

    async def load(
        self, data: bytes, options: BulkOptions, codec: Codec, name: str = "input"
    ) -> JobSpec:
        """Load the input unless the job has it: the same input joins, another is refused."""
        identity = digest(data, options.encoding)
        asked = question_digest(options.question)
        spec, loaded = await self._described()
        if spec is not None:
            self._check_definition(spec, identity, asked)
            if loaded:
                return spec  # every batch started: nothing to read or start again
        rows = list(read_input(data, options.question, codec, encoding=options.encoding, name=name))
        if spec is None:
            size = self.location.batch
            proposed = JobSpec(
                job=self.job,
                input_digest=identity,
                question_digest=asked,
                batches=[rows[index].line for index in range(0, len(rows), size)],
                rows=len(rows),
                polling=_polling(options),
                heartbeat=self.location.heartbeat,
                task_queue=(
                    sealed_task_queue(self.location.task_queue)
                    if self.location.task_queue
                    else f"verif-job/{self.job}"
                ),
            )
            # Two first arrivals at once: one starts the job, the other finds it.
            with contextlib.suppress(temporalio.exceptions.WorkflowAlreadyStartedError):
                await self.temporal.start_workflow(
                    JobWorkflow.run,
                    args=[proposed, None],
                    id=job_workflow_id(self.job),
                    task_queue=proposed.task_queue,
                    id_conflict_policy=temporalio.common.WorkflowIDConflictPolicy.USE_EXISTING,
                    id_reuse_policy=temporalio.common.WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    memo={"spec": proposed},
                )
            spec = await self._loaded_spec()
            self._check_definition(spec, identity, asked)
        records = [_record(row) for row in rows]
        limiter = anyio.CapacityLimiter(16)

        async def start(first: int, batch: list[Row]) -> None:
            async with limiter:
                await self._start_rows(
                    spec,
                    first,
                    batch,
                    id_conflict_policy=temporalio.common.WorkflowIDConflictPolicy.USE_EXISTING,
                    id_reuse_policy=temporalio.common.WorkflowIDReusePolicy.REJECT_DUPLICATE,
                )

        with library_error_unwrapped():
            async with anyio.create_task_group() as tg:
                for first, batch in zip(spec.batches, _split(records, spec.batches), strict=True):
                    tg.start_soon(start, first, batch)
        # The runs that join from now on need not read the input again.
        with contextlib.suppress(temporalio.service.RPCError):
            await self._job_handle().signal(JobWorkflow.loaded)
        return spec

    async def resend(self, spec: JobSpec, *, resend_unknown: bool, resend_failed: bool) -> int:
        """Queue again the rows ``--resend-unknown`` and ``--resend-failed``
        ask for (see :func:`is_resent`); return how many. A running batch
        takes them back itself; a finished one is started anew (and the job
        with it, if it had finished). On a running job this needs a worker of
        the job running (this process's, once started): the batches answer."""

        def again_(row: Row) -> bool:
            return is_resent(
                row.state,
                row.request_id,
                resend_unknown=resend_unknown,
                resend_failed=resend_failed,
            )

        running = (await persist(self._record, "reading the job")).running
        by_first = dict(zip(spec.batches, await self._batches(spec), strict=True))
        count = 0
        again: dict[int, list[Row]] = {}
        for first, (finished, rows) in by_first.items():
            if not any(again_(row) for row in rows):
                continue
            if not finished:
                handle = self.temporal.get_workflow_handle_for(
                    RowsWorkflow.run, rows_workflow_id(self.job, first)
                )
                try:
                    count += await handle.execute_update(
                        RowsWorkflow.resend, args=[resend_unknown, resend_failed]
                    )
                    continue
                except (temporalio.client.WorkflowUpdateFailedError, temporalio.service.RPCError):
                    # It ended meanwhile: started anew, as a finished batch is.
                    rows = await handle.result()
            again[first] = rows
        if not again:
            return count
        for rows in again.values():
            for row in rows:
                if again_(row):
                    row.state, row.result = RowState.QUEUED.value, {}
                    count += 1
        again_policy: dict[str, Any] = {
            "id_conflict_policy": temporalio.common.WorkflowIDConflictPolicy.FAIL,
            "id_reuse_policy": temporalio.common.WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        }
        if running:
            ids = [rows_workflow_id(self.job, first) for first in again]
            try:
                # The job waits for them again (refused once it is ending).
                await self._job_handle().execute_update(JobWorkflow.reopen, ids)
            except (temporalio.client.WorkflowUpdateFailedError, temporalio.service.RPCError):
                raise JournalError(
                    f"{self.where()}: the job ended while its rows were being queued again; "
                    "run the same command again"
                ) from None
        else:
            done = {
                rows_workflow_id(self.job, first): counts_of(rows)
                for first, (_, rows) in by_first.items()
                if first not in again
            }
            # The epoch goes on: a worker that saw the job stop before knows it is over.
            epoch = (await persist(self._record, "reading the job")).epoch + 1
            # Allowed to run again: a closed workflow of the same id (a duplicate
            # start by a second worker doing the same finds it running and stops).
            try:
                await self.temporal.start_workflow(
                    JobWorkflow.run,
                    args=[spec, JobState(done=done, epoch=epoch, loaded=True)],
                    id=job_workflow_id(self.job),
                    task_queue=spec.task_queue,
                    memo={"spec": spec, EPOCH_MEMO: epoch, LOADED_MEMO: True},
                    **again_policy,
                )
            except temporalio.exceptions.WorkflowAlreadyStartedError:
                return 0
            await self._restart_ids(spec, again_policy)
        for first, rows in again.items():
            await self._start_rows(spec, first, rows, **again_policy)
        return count

    async def _start_rows(self, spec: JobSpec, first: int, rows: list[Row], **policy: Any) -> None:
        """Start the rows workflow of the batch beginning at ``first`` (its id
        policies as given); one already started, by another worker, is no error."""
        with contextlib.suppress(temporalio.exceptions.WorkflowAlreadyStartedError):
            await self.temporal.start_workflow(
                RowsWorkflow.run,
                Batch(self.job, rows, spec.polling, spec.heartbeat, spec.task_queue),
                id=rows_workflow_id(self.job, first),
                task_queue=spec.task_queue,
                **policy,
            )

    async def _restart_ids(self, spec: JobSpec, policy: dict[str, Any]) -> None:
        """The ids workflows of a finished job run again with the ids the
        service gave so far, so that a resent row's new id is checked too."""
        for shard in range(id_shards(spec.rows)):
            handle = self.temporal.get_workflow_handle_for(
                IdsWorkflow.run, ids_workflow_id(self.job, shard)
            )
            try:
                lines = await handle.result()
            except temporalio.service.RPCError as exc:
                if _is_not_found(exc):
                    continue  # no send reached this shard
                raise JournalError(f"{self.where()}: {exc.message}") from None
            with contextlib.suppress(temporalio.exceptions.WorkflowAlreadyStartedError):
                await self.temporal.start_workflow(
                    IdsWorkflow.run,
                    lines,
                    id=ids_workflow_id(self.job, shard),
                    task_queue=spec.task_queue,
                    **policy,
                )

    async def _batches(
        self, spec: JobSpec, *, finished: bool = False
    ) -> list[tuple[bool, list[Row]]]:
        """Each batch's rows as its workflow holds them now, and whether it has
        finished; with ``finished`` (the job has), each batch's result, which
        its workflow may still be recording."""
        limiter = anyio.CapacityLimiter(16)
        found: dict[int, tuple[bool, list[Row]]] = {}

        async def fetch(first: int) -> None:
            handle = self.temporal.get_workflow_handle_for(
                RowsWorkflow.run, rows_workflow_id(self.job, first)
            )
            async with limiter:
                try:
                    if finished:
                        found[first] = (True, await handle.result())
                        return
                    description = await handle.describe()
                    if description.status == temporalio.client.WorkflowExecutionStatus.COMPLETED:
                        found[first] = (True, await handle.result())
                    else:
                        found[first] = (False, await handle.query(RowsWorkflow.snapshot))
                except temporalio.service.RPCError as exc:
                    if is_transient(exc):
                        raise  # waited out by the caller
                    if not _is_not_found(exc):
                        raise JournalError(f"{self.where()}: {exc.message}") from None
                except temporalio.client.WorkflowQueryFailedError as exc:
                    raise JournalError(f"{self.where()}: {exc}") from None

        with library_error_unwrapped():
            async with anyio.create_task_group() as tg:
                for first in spec.batches:
                    tg.start_soon(fetch, first)
        return [found.get(first, (False, [])) for first in spec.batches]

    async def rows(self, spec: JobSpec, *, finished: bool = False) -> list[Row]:
        """Every row of the job as its workflow holds it now (finished or not)."""
        return [row for _, rows in await self._batches(spec, finished=finished) for row in rows]

    async def progress(
        self, spec: JobSpec, *, rows: bool = True
    ) -> tuple[dict[str, int], list[Row]]:
        """The job's counts and (with ``rows``) its finished rows, from the
        batches' memos as the server's visibility store lists them: one call,
        no worker needed. A batch the listing does not show yet is described
        (its memo, no worker either); one started by a version without memos
        is asked as before."""
        latest: dict[str, temporalio.client.WorkflowExecution] = {}
        prefix = rows_workflow_id(self.job, 0)[:-1]
        if "'" not in prefix and "\\" not in prefix:
            query = f"WorkflowId STARTS_WITH '{prefix}'"
            async for execution in self.temporal.list_workflows(query, page_size=1000):
                seen = latest.get(execution.id)
                if seen is None or execution.start_time >= seen.start_time:
                    latest[execution.id] = execution
        counts: dict[str, int] = dict.fromkeys(ALL_STATES, 0)
        finished: list[Row] = []
        limiter = anyio.CapacityLimiter(16)

        async def add(first: int) -> None:
            execution = latest.get(rows_workflow_id(self.job, first))
            if execution is None or COUNTS_MEMO not in execution.raw_info.memo.fields:
                handle = self.temporal.get_workflow_handle(rows_workflow_id(self.job, first))
                async with limiter:
                    try:
                        execution = await handle.describe()
                    except temporalio.service.RPCError as exc:
                        if _is_not_found(exc):
                            return  # not started yet: its rows count as queued
                        raise
            if COUNTS_MEMO not in execution.raw_info.memo.fields:
                older = dataclasses.replace(spec, batches=[first])
                held = [row for _, batch in await self._batches(older) for row in batch]
                for name, count in _counts(held).items():
                    counts[name] += count
                finished.extend(row for row in held if row.state in FINAL_STATES)
                return
            batch_counts: dict[str, int] = await execution.memo_value(COUNTS_MEMO)
            for name, count in batch_counts.items():
                counts[name] = counts.get(name, 0) + count
            if rows:  # the rows' records are most of the memo: decoded only when asked
                finished.extend(_finished_in(await execution.memo()))

        with library_error_unwrapped():
            async with anyio.create_task_group() as tg:
                for first in spec.batches:
                    tg.start_soon(add, first)
        counts[RowState.QUEUED.value] += spec.rows - sum(counts.values())
        finished.sort(key=lambda row: row.line)
        return counts, finished

    async def counts(self) -> dict[str, int]:
        counts, _ = await self._read_progress(await self._loaded_spec())
        return counts

    async def export(self, path: str) -> dict[str, int]:
        counts, finished = await self._read_progress(await self._loaded_spec())
        await anyio.to_thread.run_sync(write_rows, _finished(finished), path)
        return counts

    async def _read_progress(self, spec: JobSpec) -> tuple[dict[str, int], list[Row]]:
        try:
            with anyio.fail_after(_READ_PATIENCE):
                return await persist(functools.partial(self.progress, spec), "reading the job")
        except TimeoutError:
            raise JournalError(
                f"{self.where()}: Temporal did not answer in {_READ_PATIENCE:.0f} s"
            ) from None
        except temporalio.service.RPCError as exc:
            raise JournalError(f"{self.where()}: {exc.message}") from None

    # -- working the job ---------------------------------------------------

    def workers(
        self,
        task_queue: str,
        activities: _Activities,
        concurrency: int,
        grace: float,
        heartbeat: float,
    ) -> list[temporalio.worker.Worker]:
        common: dict[str, Any] = {
            "graceful_shutdown_timeout": timedelta(seconds=grace),
            # The workflows are ours, deterministic and import nothing that does I/O.
            "workflow_runner": temporalio.worker.UnsandboxedWorkflowRunner(),
            # A dead worker's workflows move to the living as soon as its activities would.
            "sticky_queue_schedule_to_start_timeout": timedelta(seconds=heartbeat),
            # Heartbeats reach the server every quarter of the timeout (the
            # SDK's default, 80 %, would leave an outage 20 % of it).
            "max_heartbeat_throttle_interval": timedelta(seconds=heartbeat / 4),
            "default_heartbeat_throttle_interval": timedelta(seconds=heartbeat / 4),
        }
        return [
            # Activities first: a stopping worker lets them end, then its
            # workflows record what they did and answer the last queries.
            temporalio.worker.Worker(
                self.temporal,
                task_queue=task_queue,
                activities=[activities.send],
                # Each send activity sends up to SEND_GROUP rows at once.
                max_concurrent_activities=math.ceil(concurrency / SEND_GROUP),
                **common,
            ),
            temporalio.worker.Worker(
                self.temporal,
                task_queue=task_queue + ANSWERS_QUEUE_SUFFIX,
                activities=[activities.answers],
                max_concurrent_activities=10_000,
                **common,
            ),
            temporalio.worker.Worker(
                self.temporal,
                task_queue=task_queue,
                workflows=[JobWorkflow, RowsWorkflow, IdsWorkflow],
                **common,
            ),
        ]

    async def run(self, run: JobRun) -> dict[str, int]:
        client, options, stopper, on_progress = (
            run.client,
            run.options,
            run.stopper,
            run.on_progress,
        )
        if run.data is not None:
            spec = await self.load(run.data, options, client.codec(), run.input_name)
        else:
            found = await self.spec()
            if found is None:
                raise BulkInputError(f"{self.where()}: no such job; a new job needs --input")
            spec = found
        resend = functools.partial(
            self.resend,
            spec,
            resend_unknown=options.resend_unknown,
            resend_failed=options.resend_failed,
        )
        resend_later = options.resend_unknown or options.resend_failed
        if resend_later and not (await self._record()).running:
            # Before this run waits for the job's end: the job starts again.
            await resend()
            resend_later = False
        progress = Progress(deadline=spec.polling.deadline)
        activities = _Activities(self.temporal, client, options.concurrency, spec.heartbeat)
        workers = self.workers(
            spec.task_queue, activities, options.concurrency, stopper.grace, spec.heartbeat
        )
        finished = anyio.Event()
        stop = anyio.Event()

        whole = anyio.CancelScope()

        def on_stop(requests: int) -> None:
            progress.stopping = True
            stop.set()
            if requests > 1:
                whole.cancel()

        final: list[Row] = []
        # A run that stops before the job's end: the job's counts then.
        partial_counts: dict[str, int] = {}
        stopped_by: list[JobStoppedError] = []

        async def until_stopped() -> None:
            """Resume the job if a stop had left it waiting (this run is the
            rerun that carries on), then stop as soon as any worker of the job
            stops it."""
            await persist(self._resume, "resuming the job")
            if resend_later:
                # A running job's batches answer through this process's worker.
                await resend()
            while True:
                # A record that cannot be read now (the server away) only skips this look.
                try:
                    record = await self._record()
                except Exception as exc:
                    if not (is_transient(exc) or isinstance(exc, JournalError)):
                        raise
                else:
                    if record.running and record.stopped is not None:
                        stopped_by.append(JobStoppedError(record.stopped))
                        progress.stopping = True
                        stop.set()
                        return
                await anyio.sleep(_STOP_WATCH_SECONDS)

        async def until_finished() -> None:
            # A server away (restarted, failing over) is waited for, however long.
            ended = functools.partial(self._job_handle().result, follow_runs=True)
            await persist(ended, "waiting for the job's end")
            while await persist(self._runs_again, "reading the job"):
                # Started again meanwhile (rows sent again by another process).
                await persist(ended, "waiting for the job's end")
            # The job hears from each batch just before the batch ends: its
            # last workflow task needs this worker still running.
            rows = functools.partial(self.rows, spec, finished=True)
            final.extend(await persist(rows, "reading the job's rows"))
            finished.set()
            stop.set()

        async def report() -> None:
            while True:
                began = time.monotonic()
                # Counts that cannot be had now (the server away) only skip
                # this refresh of the display.
                with contextlib.suppress(Exception):
                    counts, _ = await self.progress(spec, rows=False)
                    progress.states = collections.Counter(counts)
                    progress.slowed_to = client.slowed_to
                    on_progress(progress)
                # A job of many batches is listed less often than a small one.
                took = time.monotonic() - began
                await anyio.sleep(max(_PROGRESS_SECONDS, 10 * took))

        unlisten = stopper.listen(on_stop)
        try:
            with whole, library_error_unwrapped():
                async with anyio.create_task_group() as tg:
                    activities.task_group = activities.claims.task_group = tg
                    for worker in workers:
                        tg.start_soon(worker.run)
                    tg.start_soon(until_finished)
                    tg.start_soon(until_stopped)
                    tg.start_soon(report)
                    if stopper.requests:
                        stop.set()
                    await stop.wait()
                    # Sends in flight get the grace to be recorded; waits move elsewhere.
                    for worker in workers[:-1]:
                        await worker.shutdown()
                    if not finished.is_set():
                        counts, finished_rows = await self._read_progress(spec)
                        final.extend(finished_rows)
                        partial_counts.update(counts)
                    await workers[-1].shutdown()
                    tg.cancel_scope.cancel()
        finally:
            unlisten()
        rows = final
        await anyio.to_thread.run_sync(write_rows, _finished(rows), run.output)
        counts = partial_counts or _counts(rows)
        progress.states = collections.Counter(counts)
        on_progress(progress)
        if stopped_by:
            raise stopped_by[0]
        return counts


async def serve(
    location: Location,
    client: VerificationClient,
    concurrency: int,
    stopper: Stopper,
    on_ready: Callable[[], None] = lambda: None,
) -> None:
    """``verif-client worker``: serve every job of a task queue until stopped."""
    job = TemporalJob(location, await connect(location))
    try:
        # The namespace exists (a worker would otherwise poll in vain, silently).
        await job.temporal.service_client.workflow_service.describe_namespace(
            temporalio.api.workflowservice.v1.DescribeNamespaceRequest(namespace=location.namespace)
        )
    except temporalio.service.RPCError as exc:
        raise JournalError(f"{location.where()}: {exc.message}") from None
    if location.job is not None:
        # A worker named after a job checks it can read it (its key) first.
        await job._loaded_spec()
    task_queue = sealed_task_queue(location.task_queue or DEFAULT_TASK_QUEUE)
    activities = _Activities(job.temporal, client, concurrency, location.heartbeat)
    workers = job.workers(task_queue, activities, concurrency, stopper.grace, location.heartbeat)
    stop = anyio.Event()
    unlisten = stopper.listen(lambda requests: stop.set())
    try:
        with library_error_unwrapped():
            async with anyio.create_task_group() as tg:
                activities.task_group = activities.claims.task_group = tg
                for worker in workers:
                    tg.start_soon(worker.run)
                on_ready()
                await stop.wait()
                for worker in workers:
                    await worker.shutdown()
                tg.cancel_scope.cancel()
    finally:
        unlisten()


def _record(row: InputRow) -> Row:
    """A row as loaded: ``invalid`` with its reason, else ``queued``."""
    if row.problem:
        reason = {"reason": row.problem}
        state = RowState.INVALID
        return Row(row.line, row.user_id, row.phone_number, row.question, state, result=reason)
    return Row(row.line, row.user_id, row.phone_number, row.question, RowState.QUEUED.value)


def _finished_in(memo: Mapping[str, Any]) -> list[Row]:
    """A batch's finished rows, from its memo's DONE_MEMO keys (a later key's
    record of a row over an earlier one's)."""
    done: dict[int, Row] = {}
    keys = sorted(
        (key for key in memo if key.startswith(DONE_MEMO)),
        key=lambda key: int(key[len(DONE_MEMO) :]),
    )
    for key in keys:
        for fields in memo[key] or ():
            done[fields["line"]] = Row(**fields)
    return list(done.values())


def _different_input(where: str) -> JournalError:
    error = different_input_error()
    return JournalError(f"{where}: {error}")


def _finished(rows: list[Row]) -> list[JobRow]:
    return [_job_row(row) for row in rows if row.state in FINAL_STATES]


def _counts(rows: list[Row]) -> dict[str, int]:
    counts: dict[str, int] = dict.fromkeys(ALL_STATES, 0)
    for row in rows:
        counts[row.state] += 1
    return counts
