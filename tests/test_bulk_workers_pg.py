"""Several ``verif-client bulk run`` processes share one PostgreSQL job.

Three workers start on a 2,000-row job against the simulator served on
loopback; one is killed with SIGKILL mid-run and a fourth joins later. The
job must end with one outcome per row, at most one SMS per row, the rows in
flight at the kill ``unknown``, and the simulator never asked faster than the
job's ``--rate``.
"""

from __future__ import annotations

import bisect
import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from verif_client._journal import open_journal
from verif_client.simulator import Script, Simulator, SimulatorConfig, serve_in_thread

psycopg = pytest.importorskip("psycopg")

ROWS = 2000
RATE = 120.0
CLI = (sys.executable, "-m", "verif_client._cli")
SEND = "SecureLink_Confirmation_SendRequestViaSms"


class Clocked:
    """The simulator, with the arrival time of every request it is asked."""

    def __init__(self, app: Simulator) -> None:
        self.app = app
        self.arrivals: list[float] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.arrivals.append(time.monotonic())
        await self.app(scope, receive, send)


def numbers() -> tuple[str, set[str], set[str]]:
    """A CSV of ROWS rows: a few never answer, a few say no, a few are invalid."""
    lines = ["phone_number,id"]
    never, declined = set(), set()
    for index in range(ROWS):
        number = f"555{index:07d}"
        if index % 250 == 3:
            number = f"555-{index}"
        elif index % 100 == 7:
            never.add(number)
        elif index % 100 == 11:
            declined.add(number)
        lines.append(f"{number},row-{index}")
    return "\n".join(lines) + "\n", never, declined


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def simulator() -> Iterator[tuple[Clocked, str]]:
    sim = Simulator(config=SimulatorConfig(script=Script(pending_polls=0)))
    _, never, declined = numbers()
    for number in never:
        sim.script_for(number, Script(answer="never"))
    for number in declined:
        sim.script_for(number, Script(answer="declined"))
    clocked = Clocked(sim)
    with serve_in_thread(clocked) as server:
        yield clocked, server.base_url


def test_workers_share_a_job_and_survive_a_kill(
    postgres_db: str, simulator: tuple[Clocked, str], tmp_path: Path
) -> None:
    clocked, base_url = simulator
    text, never, _ = numbers()
    data = tmp_path / "numbers.csv"
    data.write_text(text)
    job = f"{postgres_db}?job=acceptance&lease=2"
    env = {
        **os.environ,
        "VERIF_BASE_URL": base_url,
        "VERIF_API_USERNAME": "bulk",
        "VERIF_API_PASSWORD": "secret",
    }
    open_journal(job).close()  # the schema, so that the test can watch from the start
    db = psycopg.connect(postgres_db, autocommit=True)

    def start(name: str, *extra: str) -> subprocess.Popen[bytes]:
        command = [*CLI, "bulk", "run"]
        command += ["--journal", job, "--output", str(tmp_path / f"{name}.jsonl")]
        command += ["--question", "Did you ask to pay $25?", "--rate", str(RATE)]
        command += ["--concurrency", "20", "--deadline", "6", *extra]
        log = (tmp_path / f"{name}.log").open("wb")
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)

    def count(where: str, *params: object) -> int:
        (n,) = db.execute(
            f"SELECT count(*) FROM verif_rows WHERE job = 'acceptance' AND {where}", params
        ).fetchone()
        return int(n)

    def held_by(process: subprocess.Popen[bytes], state: str) -> set[int]:
        rows = db.execute(
            "SELECT line FROM verif_rows WHERE job = 'acceptance' AND state = %s "
            "AND worker LIKE %s",
            (state, f"%:{process.pid}:%"),
        )
        return {line for (line,) in rows}

    workers = [start(f"w{index}", "--input", str(data)) for index in range(3)]
    try:
        victim = workers[0]
        wait_for(
            lambda: count("state <> 'queued'") > 400 and bool(held_by(victim, "sending")),
            "the job to be under way with sends in flight",
        )
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        in_flight = held_by(victim, "sending")
        assert in_flight, "the kill should catch some sends in flight"
        killed_at = count("state <> 'queued'")
        wait_for(lambda: count("state <> 'queued'") > killed_at + 300, "the survivors to go on")
        workers.append(start("w3"))  # joins the loaded job, no --input
        for worker in workers[1:]:
            # 4: done, with the victim's in-flight rows unknown.
            assert worker.wait(timeout=120) == 4, (tmp_path / "w1.log").read_text()[-3000:]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        db.close()

    export = tmp_path / "export.jsonl"
    done = subprocess.run(
        [*CLI, "bulk", "export", "--journal", job, "--output", str(export)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in export.read_text().splitlines()]

    # Every input row, once, with a final outcome.
    assert len(rows) == ROWS
    assert len({row["line"] for row in rows}) == ROWS
    statuses = collections.Counter(row["status"] for row in rows)
    assert set(statuses) <= {"verified", "declined", "not_verified", "invalid", "unknown"}
    assert statuses["invalid"] == 8
    # The rows in flight at the kill, and only they, are unknown.
    assert {row["line"] for row in rows if row["status"] == "unknown"} == in_flight
    assert all(
        row["status"] in ("not_verified", "unknown") for row in rows if row["phone_number"] in never
    )

    # At most one SMS per row, whoever sent it.
    sends = collections.Counter(
        request.params.get("PhoneNumber")
        for request in clocked.app.requests
        if request.operation == SEND
    )
    assert max(sends.values()) == 1
    assert sum(sends.values()) >= ROWS - statuses["invalid"] - len(in_flight)

    # The job's rate, not each worker's (three limiters of their own would
    # allow three times as much): in any 5 s of the run the simulator saw at
    # most 5 s worth of RATE, plus one burst. The burst is what scheduling
    # delays bunch together between the shared limiter and the simulator's
    # clock; on a loaded 2-core machine 0.1 s of them is common, so allow 0.2 s.
    window, burst = 5.0, 0.2 * RATE
    arrivals = clocked.arrivals
    busiest = max(
        bisect.bisect_left(arrivals, start + window) - index for index, start in enumerate(arrivals)
    )
    print(f"{len(arrivals)} requests, busiest {window:g} s: {busiest} ({busiest / window:.1f}/s)")
    assert busiest <= RATE * window + burst
