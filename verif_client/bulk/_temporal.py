"""Bulk jobs on Temporal: any number of workers on any number of machines.

``temporal://HOST:PORT/NAMESPACE?job=ID`` names a job. Every ``bulk run``
started with it loads the input if it is the first (loading is idempotent:
the workflows' ids derive from the job and its rows), runs Temporal workers
for the job and returns when every row has its outcome. The workflows
(``_workflows``) hold the rows; the activities (``_temporal_activities``) send
and poll. A job as the command line sees it is this module's
:class:`TemporalJob`, made of its record (``_temporal_record``), its loading
and resending (``_temporal_load``), its reading for status and export
(``_temporal_read``) and a run's workers (``_temporal_run``). The rate is
leased (``_temporal_rate``), request ids are claimed (``_temporal_ids``), and
every call waits out an outage (``_temporal_outage``).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._terminal import safe
from ._input import BulkInputError
from ._journal import JournalError

if importlib.util.find_spec("temporalio") is None:  # pragma: no cover - depends on the extras
    raise JournalError(
        "a temporal:// journal needs temporalio: pip install 'verif-client[temporal]'"
    )

from ._temporal_load import JobLoading, Loading
from ._temporal_location import Location, connect
from ._temporal_read import JobReading
from ._workflows import JobSpec

if TYPE_CHECKING:
    from .._client import VerificationClient
    from ._open import JobRun
    from ._runner import Stopper

__all__ = ["TemporalJob", "serve"]


class TemporalJob(JobLoading, JobReading):
    """A job on a Temporal server (one ``job=`` of one namespace)."""

    @classmethod
    async def open(cls, text: str) -> TemporalJob:
        location = Location.parse(text)
        if location.job is None:
            raise JournalError(f"--journal {safe(text)}: name the job: ?job=ID")
        return cls(location, await connect(location))

    async def run(self, run: JobRun) -> dict[str, int]:
        options = run.options
        spec, loading = await self._defined(run)
        resend = functools.partial(
            self.resend,
            spec,
            resend_unknown=options.resend_unknown,
            resend_failed=options.resend_failed,
        )
        resend_later = options.resend_unknown or options.resend_failed
        if resend_later and loading is not None:
            # Rows are queued again only in batches that were started.
            await loading()
            loading = None
        if resend_later and not (await self._record()).running:
            # Before this run waits for the job's end: the job starts again.
            await resend()
            resend_later = False
        # Here, not at the top: `bulk status` and `bulk export` need no worker (the SDK's is large).
        from ._temporal_run import RunningJob

        running = RunningJob(self, run, spec, resend if resend_later else None, loading)
        return await running.work()

    async def _defined(self, run: JobRun) -> tuple[JobSpec, Loading | None]:
        """The job as loaded (by this run, with its input, or before it), and
        what is left of loading it, for the run to do beside its workers."""
        if run.data is not None:
            return await self.define(run.data, run.options, run.client.codec(), run.input_name)
        found = await self.spec()
        if found is None:
            raise BulkInputError(f"{self.where()}: no such job; a new job needs --input")
        return found, None


async def serve(
    location: Location,
    client: VerificationClient,
    concurrency: int,
    stopper: Stopper,
    on_ready: Callable[[], None] = lambda: None,
) -> None:
    """``verif-client worker``: serve every job of a task queue until stopped."""
    from ._temporal_run import serve_task_queue

    await serve_task_queue(location, client, concurrency, stopper, on_ready)
