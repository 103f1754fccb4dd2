"""Request-id claims share updates of the job's ids workflow: a worker's
answers activities that start within a moment of one another claim their ids
in one update, sent shortly before the first of their polls (against a real
dev server; the updates are counted in the ids workflow's history)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from temporalserver import DevServer
from test_bulk_temporal import temporal_server

pytest.importorskip("temporalio")

__all__ = ["temporal_server"]  # a fixture, used by name

# Seconds a scenario may take before it counts as hung (not a timing check).
HANG = 60


def claims_against(server: DevServer, job: str, scenario: Callable[..., Awaitable[None]]) -> int:
    """Run ``scenario(claim)`` beside a worker of the ids workflow, where
    ``claim(lines, needed_in)`` claims ids 7000+line for ``lines``; the
    updates the ids workflow took."""
    import temporalio.api.enums.v1
    import temporalio.worker

    from verif_client.bulk._temporal_ids import IdClaims
    from verif_client.bulk._temporal_location import Location, connect
    from verif_client.bulk._workflows import Claimed, IdsWorkflow, ids_workflow_id

    task_queue = f"ids-{job}"
    accepted = temporalio.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED

    async def main() -> int:
        client = await connect(Location.parse(f"temporal://{server.address}/default?job={job}"))
        worker = temporalio.worker.Worker(
            client,
            task_queue=task_queue,
            workflows=[IdsWorkflow],
            workflow_runner=temporalio.worker.UnsandboxedWorkflowRunner(),
        )
        claims = IdClaims(client)

        async def claim(lines: list[int], needed_in: float) -> None:
            rows = [Claimed(line, 7000 + line) for line in lines]
            holders = await claims.holders(job, task_queue, 1, rows, needed_in)
            assert holders == {line: line for line in lines}

        with anyio.fail_after(HANG):
            async with worker, anyio.create_task_group() as tg:
                claims.task_group = tg
                await scenario(claim)
        handle = client.get_workflow_handle(ids_workflow_id(job, 0))
        return sum([event.event_type == accepted async for event in handle.fetch_history_events()])

    return anyio.run(main)


def test_claims_made_while_the_first_waits_for_its_polls_share_its_update(
    temporal_server: DevServer,
) -> None:
    async def scenario(claim: Callable[[list[int], float], Awaitable[None]]) -> None:
        async with anyio.create_task_group() as tg:
            # Its rows' first poll is most of a second away.
            tg.start_soon(claim, [2, 3], 0.9)
            # Every task waits: a claim sent at once would be in flight now.
            await wait_all_tasks_blocked()
            tg.start_soon(claim, [4], 0.9)
            tg.start_soon(claim, [5, 6], 0.8)

    assert claims_against(temporal_server, "shared-claims", scenario) == 1


def test_a_claim_needed_now_takes_the_waiting_claims_with_it(
    temporal_server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verif_client.bulk import _temporal_ids

    # The first claim alone would wait an hour: only the second sends it.
    monkeypatch.setattr(_temporal_ids, "_CLAIM_GATHER_MAX", 3600.0)

    async def scenario(claim: Callable[[list[int], float], Awaitable[None]]) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(claim, [2], 7200.0)
            await wait_all_tasks_blocked()
            tg.start_soon(claim, [3], 0.0)

    assert claims_against(temporal_server, "urgent-claim", scenario) == 1


def test_a_claim_needed_now_is_not_held_back(temporal_server: DevServer) -> None:
    async def scenario(claim: Callable[[list[int], float], Awaitable[None]]) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(claim, [2], 0.0)
            # Its update is in flight: the next claim waits for the next one.
            await wait_all_tasks_blocked()
            tg.start_soon(claim, [3], 0.0)

    assert claims_against(temporal_server, "urgent-claims", scenario) == 2
