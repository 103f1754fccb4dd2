"""Several ``verif-client bulk run`` processes share one PostgreSQL job.

Three workers start on a job against the simulator served on loopback; one is
killed with SIGKILL with SMS requests in flight and a fourth joins later. The
job must end with one outcome per row, at most one SMS per row, the rows in
flight at the kill (and only they) ``unknown``, and the simulator never asked
faster than the job's ``--rate``.

Every step waits for something it can see (rows in a state, the simulator's
request log, a process's exit), never for time to pass: to catch sends in
flight and to look at them before anyone else may, the simulator holds back
its answers to SMS requests while the kill happens. A worker whose every slot
waits for such an answer claims nothing, so no one can take the dead worker's
rows until the answers flow again.
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

import pytest
from relsupport import SEND, HoldingService, serve_holding

from verif_client._journal import open_journal
from verif_client.simulator import Script, Simulator, SimulatorConfig

psycopg = pytest.importorskip("psycopg")

ROWS = 600
RATE = 120.0
CONCURRENCY = 20
CLI = (sys.executable, "-m", "verif_client._cli")


def numbers() -> tuple[str, set[str], set[str], int]:
    """A CSV of ROWS rows: a few never answer, a few say no, a few are invalid."""
    lines = ["phone_number,id"]
    never, declined, invalid = set(), set(), 0
    for index in range(ROWS):
        number = f"555{index:07d}"
        if index % 250 == 3:
            number = f"555-{index}"
            invalid += 1
        elif index % 100 == 7:
            never.add(number)
        elif index % 100 == 11:
            declined.add(number)
        lines.append(f"{number},row-{index}")
    return "\n".join(lines) + "\n", never, declined, invalid


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    """A bounded wait for something observable (the bound only ends a hung test)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def service() -> Iterator[HoldingService]:
    sim = Simulator(config=SimulatorConfig(script=Script(pending_polls=0)))
    _, never, declined, _ = numbers()
    for number in never:
        sim.script_for(number, Script(answer="never"))
    for number in declined:
        sim.script_for(number, Script(answer="declined"))
    with serve_holding(sim) as service:
        yield service


def test_workers_share_a_job_and_survive_a_kill(
    postgres_db: str, service: HoldingService, tmp_path: Path
) -> None:
    text, never, _, invalid = numbers()
    data = tmp_path / "numbers.csv"
    data.write_text(text)
    job = f"{postgres_db}?job=acceptance&lease=4"
    env = {
        **os.environ,
        "VERIF_BASE_URL": service.base_url,
        "VERIF_API_USERNAME": "bulk",
        "VERIF_API_PASSWORD": "secret",
    }
    open_journal(job).close()  # the schema, so that the test can watch from the start
    db = psycopg.connect(postgres_db, autocommit=True)

    def start(name: str, *extra: str) -> subprocess.Popen[bytes]:
        command = [*CLI, "bulk", "run"]
        command += ["--journal", job, "--output", str(tmp_path / f"{name}.jsonl")]
        command += ["--question", "Did you ask to pay $25?", "--rate", str(RATE)]
        command += ["--concurrency", str(CONCURRENCY), "--deadline", "6", *extra]
        # Answers are held back while the test looks: far longer than that.
        command += ["--timeout", "300"]
        log = (tmp_path / f"{name}.log").open("wb")
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)

    def count(where: str, *params: object) -> int:
        (n,) = db.execute(
            f"SELECT count(*) FROM verif_rows WHERE job = 'acceptance' AND {where}", params
        ).fetchone()
        return int(n)

    def held_by(process: subprocess.Popen[bytes], *states: str) -> dict[int, str]:
        rows = db.execute(
            "SELECT line, phone_number FROM verif_rows WHERE job = 'acceptance' "
            "AND state = ANY(%s) AND worker LIKE %s",
            (list(states), f"%:{process.pid}:%"),
        )
        return dict(rows.fetchall())

    def stalled(process: subprocess.Popen[bytes]) -> bool:
        """Every slot of the worker holds a row not yet sent or waiting for its
        answer: the worker claims nothing more (and so reaps nothing) for now."""
        return len(held_by(process, "queued", "sending")) == CONCURRENCY

    def log(name: str) -> str:
        return (tmp_path / f"{name}.log").read_text()[-3000:]

    workers = [start(f"w{index}", "--input", str(data)) for index in range(3)]
    victim = workers[0]
    try:
        wait_for(lambda: count("state NOT IN ('queued', 'invalid')") >= 100, "the job under way")
        service.hold_sms_answers()
        wait_for(
            lambda: (
                all(stalled(worker) for worker in workers)
                and bool(set(held_by(victim, "sending").values()) & service.texted())
            ),
            "every worker to wait on SMS answers, the victim with an SMS sent",
        )
        victim.send_signal(signal.SIGKILL)
        assert victim.wait(timeout=60) == -signal.SIGKILL
        # The survivors claim nothing while their answers are held, so the
        # victim's rows are still its own, however long this takes.
        in_flight = set(held_by(victim, "sending"))
        assert in_flight, "the kill should catch some sends in flight"

        # The late joiner takes its share of what is left (no --input).
        workers.append(start("w3"))
        wait_for(lambda: stalled(workers[3]), "the late worker to claim rows")
        service.release_sms_answers()
        for index, worker in enumerate(workers[1:], start=1):
            # 4: done, with the victim's in-flight rows unknown.
            assert worker.wait(timeout=300) == 4, log(f"w{index}")
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
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in export.read_text().splitlines()]

    # Every input row, once, with a final outcome.
    assert len(rows) == ROWS
    assert len({row["line"] for row in rows}) == ROWS
    statuses = collections.Counter(row["status"] for row in rows)
    assert set(statuses) <= {"verified", "declined", "not_verified", "invalid", "unknown"}
    assert statuses["invalid"] == invalid
    # The rows in flight at the kill, and only they, are unknown.
    assert {row["line"] for row in rows if row["status"] == "unknown"} == in_flight
    assert all(
        row["status"] in ("not_verified", "unknown") for row in rows if row["phone_number"] in never
    )

    # At most one SMS per row, whoever sent it.
    sends = collections.Counter(
        request.params.get("PhoneNumber") for request in service.app.calls(SEND)
    )
    assert max(sends.values()) == 1
    assert sum(sends.values()) >= ROWS - invalid - len(in_flight)

    # The job's rate, not each worker's (three limiters of their own would
    # allow three times as much). The shared limiter hands out slots 1/RATE
    # apart; a request reaches the simulator at its slot or later, never
    # earlier. So a window of the simulator's clock holds at most the slots
    # that fall in it, plus the requests whose slot came earlier and which
    # were still on their way when it opened: at most every request a worker
    # can have between slot and simulator (a send and a poll per unit of
    # concurrency), for each of the four workers. Scheduling delays of any
    # length move requests later but never past that bound.
    window = 5.0
    on_their_way = 4 * 2 * CONCURRENCY
    arrivals = service.arrivals
    busiest = max(
        bisect.bisect_left(arrivals, start + window) - index for index, start in enumerate(arrivals)
    )
    print(f"{len(arrivals)} requests, busiest {window:g} s: {busiest} ({busiest / window:.1f}/s)")
    assert busiest <= RATE * window + 1 + on_their_way
