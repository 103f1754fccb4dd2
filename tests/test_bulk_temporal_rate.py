"""The job's rate after the job: a worker whose poll, still under way for a
wait that moved to another worker, asks for a share once the job workflow has
completed gets on with it, instead of an error from deep in the poll path
(against a real dev server)."""

from __future__ import annotations

import anyio
import pytest
from temporalserver import DevServer
from test_bulk_temporal import temporal_server

pytest.importorskip("temporalio")

__all__ = ["temporal_server"]  # a fixture, used by name


def test_a_share_asked_for_after_the_job_ended_does_not_fail_the_poll(
    temporal_server: DevServer,
) -> None:
    from verif_client.bulk._temporal import TemporalJob
    from verif_client.bulk._temporal_location import Location, connect
    from verif_client.bulk._temporal_rate import LeasedRate

    async def main() -> None:
        location = Location.parse(f"temporal://{temporal_server.address}/default?job=ended")
        job = TemporalJob(location, await connect(location))
        # The job's workflow, over: an update to it is refused as not found.
        handle = await job.temporal.start_workflow(
            "verif-client.job", id="verif-job/ended", task_queue="nobody-polls"
        )
        await handle.terminate()
        rate = LeasedRate(job.lease, 5.0)
        with anyio.fail_after(60):  # a hang guard, not a timing check
            for _ in range(3):
                await rate.acquire()

    anyio.run(main)
