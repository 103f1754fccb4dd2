"""A Temporal job's record: what the job is (its spec, in the job workflow's
memo), whether it runs or was stopped, and its rate leases. Every other part
of a job (loading, reading, running) starts from it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import temporalio.client
import temporalio.service

from .._terminal import safe
from ._input import (
    different_question_error,
)
from ._journal import JournalError, different_input_error
from ._temporal_activities import (
    Record,
)
from ._temporal_location import (
    Location,
)
from ._temporal_outage import is_not_found, is_transient
from ._temporal_rate import LeasedRate
from ._workflows import (
    LOADED_MEMO,
    JobSpec,
    JobWorkflow,
    Lease,
    job_workflow_id,
)


class JobRecord:
    """A job on a Temporal server (one ``job=`` of one namespace), as its record."""

    def __init__(self, location: Location, temporal: temporalio.client.Client) -> None:
        self.location = location
        self.temporal = temporal
        self.job = location.job or ""

    def where(self) -> str:
        return f"{self.location.where()}?job={safe(self.job)}"

    async def aclose(self) -> None:
        pass  # the SDK's client holds no resource to release

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
            if is_not_found(exc):
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
            if not is_not_found(exc):
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
            raise JournalError(f"{self.where()}: {different_input_error()}")
        # A job loaded before the question was recorded has none to compare.
        if spec.question_digest and spec.question_digest != asked:
            raise JournalError(f"{self.where()}: {different_question_error()}")

    def rate_limiter(self, rate: float) -> LeasedRate:
        return LeasedRate(self.lease, rate)
