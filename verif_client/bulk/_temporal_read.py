"""Reading a Temporal job with no worker: its counts and finished rows from
the batches' memos (one visibility listing), or each batch's rows from its
workflow; ``bulk status`` and ``bulk export``."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, Final

import anyio
import anyio.abc
import temporalio.client
import temporalio.service

from ._job import ALL_STATES, FINAL_STATES, JobRow, RowState
from ._journal import JournalError
from ._runner import (
    library_error_unwrapped,
    write_rows,
)
from ._temporal_outage import is_not_found, is_transient, persist
from ._temporal_record import JobRecord
from ._workflows import (
    COUNTS_MEMO,
    DONE_MEMO,
    JobSpec,
    Row,
    RowsWorkflow,
    rows_workflow_id,
)

# `bulk status` and `bulk export` wait this long for a server that is away.
_READ_PATIENCE: Final = 60.0


class JobReading(JobRecord):
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
                    if not is_not_found(exc):
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
                        if is_not_found(exc):
                            return  # not started yet: its rows count as queued
                        raise
            if COUNTS_MEMO not in execution.raw_info.memo.fields:
                older = dataclasses.replace(spec, batches=[first])
                held = [row for _, batch in await self._batches(older) for row in batch]
                for name, count in counts_by_state(held).items():
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
        await anyio.to_thread.run_sync(write_rows, finished_rows(finished), path)
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


def finished_rows(rows: list[Row]) -> list[JobRow]:
    return [job_row(row) for row in rows if row.state in FINAL_STATES]


def counts_by_state(rows: list[Row]) -> dict[str, int]:
    counts: dict[str, int] = dict.fromkeys(ALL_STATES, 0)
    for row in rows:
        counts[row.state] += 1
    return counts
