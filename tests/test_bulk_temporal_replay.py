"""The Temporal workflows replay the histories an earlier verif_client wrote.

A job's workflows outlive the process that started them: workers upgraded
mid-job replay the history so far with the new code, and any command it issues
differently fails the workflow task (a nondeterminism error) and stalls the job.
tests/temporal_histories/ holds the histories of a 15-row job (batch=10: two
batches) run to its end by verif_client before the job-stop, request-id and
resend changes; every change to the workflows must replay them.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

pytest.importorskip("temporalio")

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

from verif_client.bulk._workflows import IdsWorkflow, JobWorkflow, RowsWorkflow

HISTORIES = sorted((Path(__file__).parent / "temporal_histories").glob("*.json"))


@pytest.mark.parametrize("path", HISTORIES, ids=[path.stem for path in HISTORIES])
def test_an_earlier_versions_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, path.read_text())

    async def replay() -> BaseException | None:
        replayer = Replayer(
            workflows=[JobWorkflow, RowsWorkflow, IdsWorkflow],
            workflow_runner=UnsandboxedWorkflowRunner(),
        )
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        return result.replay_failure

    assert anyio.run(replay) is None


def test_the_histories_are_there() -> None:
    assert {path.stem.split("_", 1)[1] for path in HISTORIES} == {
        "replay",
        "replay_rows_2",
        "replay_rows_12",
    }
