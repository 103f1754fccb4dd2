"""Loading a Temporal job: its job workflow and a rows workflow per batch,
started once however many runs load it at once; and rows queued again
(``--resend-unknown``, ``--resend-failed``), in running and finished batches."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, Final

import anyio
import anyio.abc
import temporalio.client
import temporalio.common
import temporalio.exceptions
import temporalio.service

from .._codec import Codec
from ._input import (
    digest,
    question_digest,
    read_input,
)
from ._job import FINAL_STATES, BulkOptions, InputRow, RowState, is_resent
from ._journal import JournalError
from ._runner import (
    library_error_unwrapped,
)
from ._sealed import sealed_task_queue
from ._temporal_outage import is_not_found, persist
from ._temporal_read import JobReading
from ._workflows import (
    COUNTS_MEMO,
    DONE_MEMO,
    EPOCH_MEMO,
    LOADED_MEMO,
    Batch,
    IdsWorkflow,
    JobSpec,
    JobState,
    JobWorkflow,
    Polling,
    Row,
    RowsWorkflow,
    batch_of,
    counts_of,
    id_shards,
    ids_workflow_id,
    job_workflow_id,
    rows_workflow_id,
    send_group_of,
)

# A run that finds the job just started by another waits this long for the
# other to start its batches, looking this often.
_JOINER_PATIENCE: Final = 10.0
_JOINER_LOOK_EVERY: Final = 0.25

# What is left of loading a job: starting the batches not started yet.
Loading = Callable[[], Coroutine[Any, Any, None]]


class JobLoading(JobReading):
    async def load(
        self, data: bytes, options: BulkOptions, codec: Codec, name: str = "input"
    ) -> JobSpec:
        """Load the input unless the job has it: the same input joins, another is refused."""
        spec, rest = await self.define(data, options, codec, name)
        if rest is not None:
            await rest()
        return spec

    async def define(
        self, data: bytes, options: BulkOptions, codec: Codec, name: str = "input"
    ) -> tuple[JobSpec, Loading | None]:
        """The job as loaded, started here if it is new (another input or
        question is refused), and what is left of loading it: starting its
        batches (None: every one was). A run's workers can work the batches
        started while the rest are being started."""
        identity = digest(data, options.encoding)
        asked = question_digest(options.question)

        def read() -> list[InputRow]:
            return list(
                read_input(data, options.question, codec, encoding=options.encoding, name=name)
            )

        spec, loaded, started = await self._described()
        rows: list[InputRow] | None = None
        # How long the run that started the job may take to start its batches.
        patience = 0.0
        if spec is not None:
            self._check_definition(spec, identity, asked)
            if loaded:
                return spec, None  # every batch started: nothing to read or start again
            if started is not None:
                # Started a moment ago: the run that started it is starting its batches.
                age = (datetime.now(UTC) - started).total_seconds()
                patience = max(0.0, _JOINER_PATIENCE - age)
        else:
            rows = read()
            # Two first arrivals at once: one starts the job, the other finds it.
            if not await self._start_job(self._proposed(rows, identity, asked, options)):
                patience = _JOINER_PATIENCE
            spec = await self._loaded_spec()
            self._check_definition(spec, identity, asked)
        defined = spec

        async def rest() -> None:
            if patience and await self._loaded_by_another(patience):
                return
            await self._start_batches(defined, rows if rows is not None else read())

        return spec, rest

    def _proposed(
        self, rows: list[InputRow], identity: str, asked: str, options: BulkOptions
    ) -> JobSpec:
        group = send_group_of(options.concurrency)
        size = self.location.batch or batch_of(group)
        return JobSpec(
            job=self.job,
            input_digest=identity,
            question_digest=asked,
            batches=[rows[index].line for index in range(0, len(rows), size)],
            rows=len(rows),
            polling=polling_of(options),
            heartbeat=self.location.heartbeat,
            send_group=group,
            task_queue=(
                sealed_task_queue(self.location.task_queue)
                if self.location.task_queue
                else f"verif-job/{self.job}"
            ),
        )

    async def _start_job(self, proposed: JobSpec) -> bool:
        """Start the job's workflow; False if another run started it first."""
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
            return False
        return True

    async def _start_batches(self, spec: JobSpec, rows: list[InputRow]) -> None:
        """Start every batch not started yet, then record that all were."""
        records = [_loaded_row(row) for row in rows]
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

    async def _loaded_by_another(self, patience: float) -> bool:
        """Whether the run that started the job a moment ago finishes starting
        its batches within ``patience`` seconds: the many workers of a job
        launched at once then start each batch once between them, not once
        each. False if it takes longer (it may have died mid-load): this run
        starts what is missing."""
        with anyio.move_on_after(patience):
            while True:
                try:
                    _, loaded, _ = await self._described()
                except JournalError:
                    return False  # this run loads what is missing, as after a crash
                if loaded:
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
        return count if await self._start_again(spec, by_first, again, running=running) else 0

    async def _start_again(
        self,
        spec: JobSpec,
        by_first: dict[int, tuple[bool, list[Row]]],
        again: dict[int, list[Row]],
        *,
        running: bool,
    ) -> bool:
        """Start anew the finished batches ``again`` (of ``by_first``, every
        batch), their rows queued again: the job waits for them if it runs,
        else it starts anew too. False if another process started it first."""
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
                return False
            await self._restart_ids(spec, again_policy)
        for first, rows in again.items():
            await self._start_rows(spec, first, rows, **again_policy)
        return True

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
                Batch(
                    self.job, rows, spec.polling, spec.heartbeat, spec.task_queue, spec.send_group
                ),
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
                if is_not_found(exc):
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


def _split(rows: list[Any], firsts: list[int]) -> list[list[Any]]:
    """``rows`` (in line order) cut where each batch's first line starts."""
    batches: list[list[Any]] = [[] for _ in firsts]
    index = 0
    for row in rows:
        while index + 1 < len(firsts) and row.line >= firsts[index + 1]:
            index += 1
        batches[index].append(row)
    return batches


def _loaded_row(row: InputRow) -> Row:
    """A row as loaded: ``invalid`` with its reason, else ``queued``."""
    if row.problem:
        reason = {"reason": row.problem}
        state = RowState.INVALID
        return Row(row.line, row.user_id, row.phone_number, row.question, state, result=reason)
    return Row(row.line, row.user_id, row.phone_number, row.question, RowState.QUEUED.value)
