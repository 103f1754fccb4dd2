"""A request id given to two rows, seen across the whole job, off the send path.

The job's ids workflows (``verif-job/ID/ids/N``, ids spread over them by
value) hold each request id with the line it was given to first. A worker
claims the ids of the rows it is about to poll, not of the rows it sends: a
send's slot is never held waiting for Temporal, and a claim that meets an
outage or back-pressure is retried (:func:`persist`) instead of ending its row
``unknown``. A claim is idempotent (the same row claiming its id again gets
its own line back), so an answers activity retried on another worker claims
again harmlessly.

Claims coalesce per worker: at most one update in flight per ids workflow,
carrying every claim made while the one before it was in flight, so the
updates per row fall as the load rises, and a workflow sees at most one update
in flight per worker. A claim is needed only by its row's first poll, a
second after the SMS by default, and the answers activity that makes it
starts a fraction of that after the SMS: claims wait for one another until
shortly before the first of their polls (at most a second), so a worker's
many small answers activities share an update.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc
import attrs
import temporalio.client
import temporalio.common

from ._temporal_outage import persist
from ._workflows import Claimed, IdsWorkflow, ids_workflow_id

# Claims this worker saw settled, kept so a row waited on again (a new round of
# answers) costs no update: (job, request id) -> the line that holds it.
_KNOWN_KEPT = 200_000
# A claim goes this long before the first poll that needs it (an update's
# round trip on a loaded server), and waits for others at most this long.
_CLAIM_LEAD = 0.3
_CLAIM_GATHER_MAX = 1.0


@attrs.define
class _Pending:
    """The claims of one ids workflow waiting for the next update."""

    rows: list[Claimed] = attrs.Factory(list)
    holders: dict[int, int] = attrs.Factory(dict)
    failure: BaseException | None = None
    done: anyio.Event = attrs.Factory(anyio.Event)
    # When the update goes (the event loop's clock), and what is set when a
    # claim that needs it sooner joins.
    flush_at: float = 0.0
    sooner: anyio.Event = attrs.Factory(anyio.Event)


class IdClaims:
    def __init__(self, temporal: temporalio.client.Client) -> None:
        self._temporal = temporal
        self._pending: dict[str, _Pending] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._known: dict[tuple[str, int], int] = {}
        self.task_group: anyio.abc.TaskGroup | None = None

    async def holders(
        self, job: str, task_queue: str, shards: int, rows: list[Claimed], needed_in: float = 0.0
    ) -> dict[int, int]:
        """The line that holds each row's request id (the row's own, or the
        first other row given it), by the row's line, within about
        ``needed_in`` seconds (the first poll of these rows)."""
        wait = min(needed_in - _CLAIM_LEAD, _CLAIM_GATHER_MAX)
        flush_at = anyio.current_time() + max(0.0, wait)
        found: dict[int, int] = {}
        by_shard: dict[int, list[Claimed]] = {}
        for row in rows:
            holder = self._known.get((job, row.request_id))
            if holder is not None:
                found[row.line] = holder
            else:
                by_shard.setdefault(row.request_id % shards, []).append(row)
        waits = [
            (self._enqueue(job, task_queue, shard, claimed, flush_at), claimed)
            for shard, claimed in by_shard.items()
        ]
        for pending, claimed in waits:
            await pending.done.wait()
            if pending.failure is not None:
                raise pending.failure
            for row in claimed:
                found[row.line] = pending.holders[row.line]
        return found

    def _enqueue(
        self, job: str, task_queue: str, shard: int, rows: list[Claimed], flush_at: float
    ) -> _Pending:
        workflow_id = ids_workflow_id(job, shard)
        pending = self._pending.get(workflow_id)
        if pending is None:
            pending = self._pending[workflow_id] = _Pending(flush_at=flush_at)
            assert self.task_group is not None
            self.task_group.start_soon(self._flush, job, task_queue, workflow_id, pending)
        elif flush_at < pending.flush_at:
            pending.flush_at = flush_at
            pending.sooner.set()
            pending.sooner = anyio.Event()
        pending.rows.extend(rows)
        return pending

    async def _flush(self, job: str, task_queue: str, workflow_id: str, pending: _Pending) -> None:
        # Claims made meanwhile join this update.
        while (wait := pending.flush_at - anyio.current_time()) > 0:
            sooner = pending.sooner
            with anyio.move_on_after(wait):
                await sooner.wait()
        lock = self._locks.setdefault(workflow_id, anyio.Lock())
        async with lock:
            # From here on, new claims wait for the next update.
            if self._pending.get(workflow_id) is pending:
                del self._pending[workflow_id]

            async def claim() -> Any:
                # A new operation each try: one is spent by the call it is given to.
                start = temporalio.client.WithStartWorkflowOperation(
                    IdsWorkflow.run,
                    {},
                    id=workflow_id,
                    task_queue=task_queue,
                    id_conflict_policy=temporalio.common.WorkflowIDConflictPolicy.USE_EXISTING,
                    id_reuse_policy=temporalio.common.WorkflowIDReusePolicy.REJECT_DUPLICATE,
                )
                return await self._temporal.execute_update_with_start_workflow(
                    IdsWorkflow.claim, pending.rows, start_workflow_operation=start
                )

            try:
                holders = await persist(claim, "claiming request ids")
            except Exception as exc:
                pending.failure = exc
            else:
                if len(self._known) > _KNOWN_KEPT:
                    self._known.clear()
                for row, holder in zip(pending.rows, holders, strict=True):
                    pending.holders[row.line] = holder
                    self._known[(job, row.request_id)] = holder
            finally:
                pending.done.set()
