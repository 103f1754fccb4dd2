"""Running a Temporal job: a process's workers for it, until the job ends or
the run is stopped (``bulk run``), or for every job of a task queue
(``verif-client worker``)."""

from __future__ import annotations

import collections
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc

from .. import __version__
from .._client import VerificationClient
from ._journal import JournalError
from ._runner import (
    JobStoppedError,
    Progress,
    Stopper,
    library_error_unwrapped,
    write_rows,
)

if TYPE_CHECKING:
    from ._open import JobRun

import temporalio.api.workflowservice.v1
import temporalio.client
import temporalio.service
import temporalio.worker

from ._sealed import sealed_task_queue
from ._temporal_activities import (
    STOP_WATCH_SECONDS,
    Activities,
)
from ._temporal_load import Loading
from ._temporal_location import (
    DEFAULT_TASK_QUEUE,
    Location,
    connect,
)
from ._temporal_outage import is_transient, persist
from ._temporal_read import counts_by_state, finished_rows
from ._workflows import (
    ANSWERS_QUEUE_SUFFIX,
    IdsWorkflow,
    JobSpec,
    JobWorkflow,
    Row,
    RowsWorkflow,
)

if TYPE_CHECKING:
    from ._temporal import TemporalJob

# The display's counts are read at most this often (and less often for a job
# whose batches take long to list): each read lists every batch's memo, and
# every worker of the job reads them.
_PROGRESS_SECONDS: Final = 5.0
# How long a worker stopped mid-job waits for the send activities its polls
# under way bring, before the SDK shuts it down (see SendCapacity.settle).
_SETTLE_SECONDS: Final = 1.0


def _activities_only(
    activity_supplier: temporalio.worker.CustomSlotSupplier,
) -> temporalio.worker.WorkerTuner:
    """The tuner of an SDK worker that runs only activities, fetched as
    ``activity_supplier`` decides: the SDK wants a size for its workflows,
    local activities and Nexus tasks all the same."""
    unused = temporalio.worker.FixedSizeSlotSupplier(1)
    return temporalio.worker.WorkerTuner.create_composite(
        workflow_supplier=unused,
        activity_supplier=activity_supplier,
        local_activity_supplier=unused,
        nexus_supplier=unused,
    )


def make_workers(
    temporal: temporalio.client.Client,
    task_queue: str,
    activities: Activities,
    concurrency: int,
    grace: float,
    heartbeat: float,
) -> list[temporalio.worker.Worker]:
    """The SDK's workers of a process: sends, answers and workflows."""
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
            temporal,
            task_queue=task_queue,
            activities=[activities.send],
            # A send activity is fetched once all its rows can be sent at once.
            tuner=_activities_only(activities.capacity),
            # Few long polls per worker: the server matches every one,
            # and a job's workers are many (the SDK's default is 5 each).
            max_concurrent_activity_task_polls=2,
            **common,
        ),
        temporalio.worker.Worker(
            temporal,
            task_queue=task_queue + ANSWERS_QUEUE_SUFFIX,
            activities=[activities.answers],
            # An answers activity is fetched while this worker's polls keep up.
            tuner=_activities_only(activities.answering),
            max_concurrent_activity_task_polls=2,
            **common,
        ),
        temporalio.worker.Worker(
            temporal,
            task_queue=task_queue,
            workflows=[JobWorkflow, RowsWorkflow, IdsWorkflow],
            max_concurrent_workflow_task_polls=2,
            **common,
        ),
    ]


class RunningJob:
    """One ``bulk run`` working a loaded job: its workers, a watch for a stop
    by any worker of the job, a wait for the job's end, and the display's
    counts; then its ``--output``."""

    def __init__(
        self,
        job: TemporalJob,
        run: JobRun,
        spec: JobSpec,
        resend: Callable[[], Awaitable[int]] | None,
        loading: Loading | None = None,
    ) -> None:
        self.job = job
        self.run = run
        self.spec = spec
        # Rows to queue again once this process's worker runs (the batches answer through it).
        self.resend = resend
        # The batches left to start: the workers work those started meanwhile.
        self.loading = loading
        self.progress = Progress(deadline=spec.polling.deadline)
        concurrency = run.options.concurrency
        self.activities = Activities(
            job.temporal, run.client, concurrency, spec.heartbeat, group=spec.send_group
        )
        self.workers = make_workers(
            job.temporal,
            spec.task_queue,
            self.activities,
            concurrency,
            run.stopper.grace,
            spec.heartbeat,
        )
        self.finished = anyio.Event()
        self.stop = anyio.Event()
        self.whole = anyio.CancelScope()
        self.final: list[Row] = []
        # A run that stops before the job's end: the job's counts then.
        self.partial_counts: dict[str, int] = {}
        self.stopped_by: list[JobStoppedError] = []

    def _on_stop(self, requests: int) -> None:
        self.progress.stopping = True
        self.stop.set()
        if requests > 1:
            self.whole.cancel()

    async def until_stopped(self) -> None:
        """Resume the job if a stop had left it waiting (this run is the
        rerun that carries on), then stop as soon as any worker of the job
        stops it."""
        job = self.job
        await persist(job._resume, "resuming the job")
        if self.resend is not None:
            await self.resend()
        while True:
            # A record that cannot be read now (the server away) only skips this look.
            try:
                record = await job._record()
            except Exception as exc:
                if not (is_transient(exc) or isinstance(exc, JournalError)):
                    raise
            else:
                self.activities.remember(job.job, record)
                if record.running and record.stopped is not None:
                    self.stopped_by.append(JobStoppedError(record.stopped))
                    self.progress.stopping = True
                    self.stop.set()
                    return
            await anyio.sleep(STOP_WATCH_SECONDS)

    async def until_finished(self) -> None:
        job = self.job
        # A server away (restarted, failing over) is waited for, however long.
        ended = functools.partial(job._job_handle().result, follow_runs=True)
        await persist(ended, "waiting for the job's end")
        while await persist(job._runs_again, "reading the job"):
            # Started again meanwhile (rows sent again by another process).
            await persist(ended, "waiting for the job's end")
        # The job hears from each batch just before the batch ends: its
        # last workflow task needs this worker still running.
        rows = functools.partial(job.rows, self.spec, finished=True)
        self.final.extend(await persist(rows, "reading the job's rows"))
        self.finished.set()
        self.stop.set()

    async def report(self) -> None:
        while True:
            began = time.monotonic()
            # Counts that cannot be had now (the server away) only skip
            # this refresh of the display.
            with contextlib.suppress(Exception):
                counts, _ = await self.job.progress(self.spec, rows=False)
                self.progress.states = collections.Counter(counts)
                self.progress.slowed_to = self.run.client.slowed_to
                self.run.on_progress(self.progress)
            # A job of many batches, or a server made slow by many workers
            # listing at once, is listed less often: a listing costs the
            # server about 30 ms of CPU for 40 batches, for every worker.
            took = time.monotonic() - began
            await anyio.sleep(max(_PROGRESS_SECONDS, 40 * took))

    async def work(self) -> dict[str, int]:
        """Run until the job ends or this run stops; write ``--output``; the counts."""
        stopper = self.run.stopper
        unlisten = stopper.listen(self._on_stop)
        try:
            with self.whole, library_error_unwrapped():
                async with anyio.create_task_group() as tg:
                    self.activities.task_group = self.activities.claims.task_group = tg
                    for worker in self.workers:
                        tg.start_soon(worker.run)
                    if self.loading is not None:
                        tg.start_soon(self.loading)
                    tg.start_soon(self.until_finished)
                    tg.start_soon(self.until_stopped)
                    tg.start_soon(self.report)
                    if stopper.requests:
                        self.stop.set()
                    await self.stop.wait()
                    await self._wind_down()
                    tg.cancel_scope.cancel()
        finally:
            unlisten()
        rows = finished_rows(self.final)
        await anyio.to_thread.run_sync(write_rows, rows, self.run.output)
        counts = self.partial_counts or counts_by_state(self.final)
        self.progress.states = collections.Counter(counts)
        self.run.on_progress(self.progress)
        if self.stopped_by:
            raise self.stopped_by[0]
        return counts

    async def _wind_down(self) -> None:
        self.activities.capacity.close()
        if not self.finished.is_set():
            # Stopped mid-job: what the polls under way bring goes back unsent.
            await self.activities.capacity.settle(_SETTLE_SECONDS)
        # Sends in flight get the grace to be recorded; waits move elsewhere.
        for worker in self.workers[:-1]:
            await worker.shutdown()
        if not self.finished.is_set():
            counts, finished = await self.job._read_progress(self.spec)
            self.final.extend(finished)
            self.partial_counts.update(counts)
        await self.workers[-1].shutdown()


async def serve_task_queue(
    location: Location,
    client: VerificationClient,
    concurrency: int,
    stopper: Stopper,
    on_ready: Callable[[], None] = lambda: None,
) -> None:
    """``verif-client worker``: serve every job of a task queue until stopped."""
    from ._temporal import TemporalJob

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
    workers = make_workers(
        job.temporal, task_queue, activities, concurrency, stopper.grace, location.heartbeat
    )
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
                activities.capacity.close()
                await activities.capacity.settle(_SETTLE_SECONDS)
                for worker in workers:
                    await worker.shutdown()
                tg.cancel_scope.cancel()
    finally:
        unlisten()
