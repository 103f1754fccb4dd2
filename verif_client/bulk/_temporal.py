"""Bulk jobs on Temporal: any number of workers on any number of machines.

``temporal://HOST:PORT/NAMESPACE?job=ID`` names a job. Every ``bulk run``
started with it loads the input if it is the first (loading is idempotent:
the workflows' ids derive from the job and its rows), runs Temporal workers
for the job and returns when every row has its outcome. The workflows
(``_workflows``) hold the rows; the activities (``_temporal_activities``) send
and poll; this module is the job as the command line sees it: loading,
resending, status and export (from the batches' memos), and a run's workers.
The rate is leased (``_temporal_rate``), request ids are claimed
(``_temporal_ids``), and every call waits out an outage (``_temporal_outage``).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc

from .. import __version__
from .._client import VerificationClient
from .._codec import Codec
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
from ._runner import (
    JobStoppedError,
    Progress,
    Stopper,
    library_error_unwrapped,
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
except ImportError:  # pragma: no cover - depends on the installed extras
    raise JournalError(
        "a temporal:// journal needs temporalio: pip install 'verif-client[temporal]'"
    ) from None

from ._sealed import sealed_task_queue
from ._temporal_activities import (
    STOP_WATCH_SECONDS,
    Activities,
    Record,
)
from ._temporal_location import (
    DEFAULT_TASK_QUEUE,
    Location,
    connect,
)
from ._temporal_outage import is_transient, persist
from ._temporal_rate import LeasedRate
from ._workflows import (
    ANSWERS_QUEUE_SUFFIX,
    COUNTS_MEMO,
    DONE_MEMO,
    EPOCH_MEMO,
    LOADED_MEMO,
    SEND_GROUP,
    Batch,
    IdsWorkflow,
    JobSpec,
    JobState,
    JobWorkflow,
    Lease,
    Polling,
    Row,
    RowsWorkflow,
    counts_of,
    id_shards,
    ids_workflow_id,
    job_workflow_id,
    rows_workflow_id,
)

# The display's counts are read at most this often (and less often for a job
# whose batches take long to list): each read lists every batch's memo, and
# every worker of the job reads them.
_PROGRESS_SECONDS: Final = 5.0
# A run that finds the job just started by another waits this long for the
# other to start its batches, looking this often.
_JOINER_PATIENCE: Final = 10.0
_JOINER_LOOK_EVERY: Final = 0.25
# `bulk status` and `bulk export` wait this long for a server that is away.
_READ_PATIENCE: Final = 60.0


def polling_of(options: BulkOptions) -> Polling:
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


def job_row(row: Row) -> JobRow:
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

    async def _described(self) -> tuple[JobSpec | None, bool, datetime | None]:
        """The job's record (None if no such job), whether every batch of it
        was started, and when the job was."""
        try:
            description = await self._job_handle().describe()
        except temporalio.service.RPCError as exc:
            if _is_not_found(exc):
                return None, False, None
            raise JournalError(f"{self.where()}: {exc.message}") from None
        spec: JobSpec = await description.memo_value("spec", type_hint=JobSpec)
        loaded: bool = await description.memo_value(LOADED_MEMO, False, type_hint=bool)
        return spec, loaded, description.start_time

    async def _loaded_spec(self) -> JobSpec:
        spec = await self.spec()
        if spec is None:
            raise JournalError(f"{self.where()}: no such job")
        return spec

    async def _record(self) -> Record:
        """The job's record; the server away or busy is raised as it is (to be waited out)."""
        try:
            return await Record.read(self.temporal, self.job)
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
        spec, loaded, started = await self._described()
        if spec is not None:
            self._check_definition(spec, identity, asked)
            if not loaded and started is not None:
                # Started a moment ago: the run that started it is starting its batches.
                age = (datetime.now(UTC) - started).total_seconds()
                loaded = age < _JOINER_PATIENCE and await self._loaded_by_another(
                    _JOINER_PATIENCE - age
                )
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
                polling=polling_of(options),
                heartbeat=self.location.heartbeat,
                task_queue=(
                    sealed_task_queue(self.location.task_queue)
                    if self.location.task_queue
                    else f"verif-job/{self.job}"
                ),
            )
            # Two first arrivals at once: one starts the job, the other finds it.
            lost_the_race = False
            try:
                await self.temporal.start_workflow(
                    JobWorkflow.run,
                    args=[proposed, None],
                    id=job_workflow_id(self.job),
                    task_queue=proposed.task_queue,
                    id_conflict_policy=temporalio.common.WorkflowIDConflictPolicy.FAIL,
                    id_reuse_policy=temporalio.common.WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    memo={"spec": proposed},
                )
            except temporalio.exceptions.WorkflowAlreadyStartedError:
                lost_the_race = True
            spec = await self._loaded_spec()
            self._check_definition(spec, identity, asked)
            if lost_the_race and await self._loaded_by_another(_JOINER_PATIENCE):
                return spec
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

    async def _loaded_by_another(self, patience: float) -> bool:
        """Whether the run that started the job a moment ago finishes starting
        its batches within ``patience`` seconds: the many workers of a job
        launched at once then start each batch once between them, not once
        each. False if it takes longer (it may have died mid-load): this run
        starts what is missing."""
        with anyio.move_on_after(patience):
            while True:
                try:
                    description = await self._job_handle().describe()
                except temporalio.service.RPCError:
                    return False  # this run loads what is missing, as after a crash
                if await description.memo_value(LOADED_MEMO, False, type_hint=bool):
                    return True
                await anyio.sleep(_JOINER_LOOK_EVERY)
        return False

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
        # Its memo from the start: status and export read it before the
        # workflow's first task has run (and a query would wait for a worker).
        memo: dict[str, Any] = {COUNTS_MEMO: counts_of(rows)}
        finished = [dataclasses.asdict(row) for row in rows if row.state in FINAL_STATES]
        if finished:
            memo[f"{DONE_MEMO}0"] = finished
        with contextlib.suppress(temporalio.exceptions.WorkflowAlreadyStartedError):
            await self.temporal.start_workflow(
                RowsWorkflow.run,
                Batch(self.job, rows, spec.polling, spec.heartbeat, spec.task_queue),
                id=rows_workflow_id(self.job, first),
                task_queue=spec.task_queue,
                memo=memo,
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
        activities: Activities,
        concurrency: int,
        grace: float,
        heartbeat: float,
    ) -> list[temporalio.worker.Worker]:
        common: dict[str, Any] = {
            "graceful_shutdown_timeout": timedelta(seconds=grace),
            # The workflows are ours, deterministic and import nothing that does I/O.
            "workflow_runner": temporalio.worker.UnsandboxedWorkflowRunner(),
            # Named, not derived: the SDK's default hashes the bytecode of every
            # module loaded, compiling each from source (a tenth of a short
            # worker's CPU). Versions are told apart by patches, not by this id.
            "build_id": f"verif-client/{__version__}",
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
                # Few long polls per worker: the server matches every one,
                # and a job's workers are many (the SDK's default is 5 each).
                max_concurrent_activity_task_polls=2,
                **common,
            ),
            temporalio.worker.Worker(
                self.temporal,
                task_queue=task_queue + ANSWERS_QUEUE_SUFFIX,
                activities=[activities.answers],
                max_concurrent_activities=10_000,
                max_concurrent_activity_task_polls=2,
                **common,
            ),
            temporalio.worker.Worker(
                self.temporal,
                task_queue=task_queue,
                workflows=[JobWorkflow, RowsWorkflow, IdsWorkflow],
                max_concurrent_workflow_task_polls=2,
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
        activities = Activities(self.temporal, client, options.concurrency, spec.heartbeat)
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
                    activities.remember(self.job, record)
                    if record.running and record.stopped is not None:
                        stopped_by.append(JobStoppedError(record.stopped))
                        progress.stopping = True
                        stop.set()
                        return
                await anyio.sleep(STOP_WATCH_SECONDS)

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
    activities = Activities(job.temporal, client, concurrency, location.heartbeat)
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
    return [job_row(row) for row in rows if row.state in FINAL_STATES]


def _counts(rows: list[Row]) -> dict[str, int]:
    counts: dict[str, int] = dict.fromkeys(ALL_STATES, 0)
    for row in rows:
        counts[row.state] += 1
    return counts
