"""A Temporal job rides out the faults Temporal is there for, attacked from outside.

Four ``bulk run`` processes share a rate-limited job on a dev server of the
test's own; the server is SIGKILLed while sends are in flight, or while rows
are polling, kept down for 2 s or for 30 s (the down time is the fault itself,
not a wait for something), and started again on its database. Every worker
waits it out: no exit 70, no traceback, one line per outage instead of the
SDK's retry warnings, and the job ends with every row verified, each number
texted once, nothing ``unknown`` because Temporal was away. A worker that
dies while the server is away leaves ``unknown`` only the rows it was sending.
"""

from __future__ import annotations

import bisect
import collections
import json
import signal
import time
from pathlib import Path

import pytest
from relsupport import SEND, HoldingService
from temporalserver import DevServer
from test_bulk_temporal import (
    ROWS as KILL_ROWS,
)
from test_bulk_temporal import (
    Job,
    loaded_with_answers_held,
    numbers,
    reap,
    sends,
    service,
    small_worker_sending,
    started,
    wait_for,
)

from verif_client.simulator import Script

pytest.importorskip("temporalio")

# The simulator fixture, shared with the other Temporal tests.
__all__ = ["service"]

WORKERS = 4
ROWS = 120
RATE = 40
# Longer than the longest outage: a server's timers count an outage as silence.
HEARTBEAT = 60


@pytest.mark.timeout(300)
@pytest.mark.parametrize("down", [2, 30], ids=["down-2s", "down-30s"])
@pytest.mark.parametrize("moment", ["mid-send", "mid-poll"])
def test_a_server_killed_mid_job_is_waited_out(
    moment: str, down: int, service: HoldingService, tmp_path: Path
) -> None:
    server = started(DevServer(tmp_path / "own.db", tmp_path / "own.log"))
    phones = numbers(tmp_path / "in.csv", ROWS, prefix="560")
    for phone in phones:
        service.app.script_for(phone, Script(pending_polls=2))
    job = Job(server, service, tmp_path, f"outage-{moment}-{down}")
    job.url = job.url.replace("heartbeat=2", f"heartbeat={HEARTBEAT}")
    flags = ["--input", str(tmp_path / "in.csv"), "--rate", str(RATE), "--concurrency", "10"]
    if moment == "mid-send":
        # Sends in flight at the kill: their answers come back while the server is down.
        service.hold_sms_answers(after=20)
    workers = [job.start(f"w{index}", *flags) for index in range(WORKERS)]
    try:
        if moment == "mid-send":
            wait_for(lambda: len(service.texted()) > 20, "sends in flight")
        else:
            polls = lambda: len(service.app.calls()) - len(service.app.calls(SEND))  # noqa: E731
            wait_for(lambda: polls() >= 40, "rows polling")
        server.kill()
        service.release_sms_answers()
        time.sleep(down)  # the outage itself
        assert all(worker.poll() is None for worker in workers), "a worker gave up"
        server.start()  # the same address and database
        for index, worker in enumerate(workers):
            assert worker.wait(timeout=240) == 0, job.log(f"w{index}")
    finally:
        reap(workers)
        server.stop()

    rows = [json.loads(line) for line in (tmp_path / "w0.jsonl").read_text().splitlines()]
    assert sorted(row["line"] for row in rows) == list(range(2, ROWS + 2))
    assert collections.Counter(row["status"] for row in rows) == {"verified": ROWS}
    assert sends(service) == collections.Counter(phones)
    for index in range(WORKERS):
        log = job.log(f"w{index}")
        assert "Traceback" not in log
        assert "WARN" not in log
        # One line when the outage starts and one when it ends (a restart can
        # answer and fail again once while the server comes up).
        assert log.count("Temporal is unreachable") <= 2, log
    # The job's rate held across the outage and the workers' catching up.
    arrivals = service.arrivals
    on_their_way = WORKERS * 2 * 10
    busiest = max(
        bisect.bisect_left(arrivals, start + 1.0) - index for index, start in enumerate(arrivals)
    )
    assert busiest <= RATE + 1 + on_their_way, busiest


@pytest.mark.timeout(300)
def test_rows_a_small_worker_handed_back_survive_its_death_in_an_outage(
    service: HoldingService, tmp_path: Path
) -> None:
    server = started(DevServer(tmp_path / "own.db", tmp_path / "own.log"))
    # Heartbeats every 5 s: the first worker's activities outlive the outage
    # (their silence is shorter than the timeout); the victim's times out.
    phones, job, first = loaded_with_answers_held(
        server, service, tmp_path, "handed-back", heartbeat=20
    )
    workers = [first]
    try:
        # It sends its 10 once the server holds its heartbeat naming the 40.
        victim, victims_rows = small_worker_sending(job, service, workers)
        # The server goes, and the worker dies while it is away: only the
        # heartbeat the server held says which of its rows were never sent.
        server.kill()
        victim.send_signal(signal.SIGKILL)
        assert victim.wait(timeout=60) == -signal.SIGKILL
        time.sleep(2)  # the outage itself
        server.start()  # the same address and database
        service.release_sms_answers()
        assert first.wait(timeout=240) == 4, job.log("w0")
        rows = job.export()
    finally:
        reap(workers)
        server.stop()
    assert sorted(row["line"] for row in rows) == list(range(2, KILL_ROWS + 2))
    unknown = {row["phone_number"] for row in rows if row["status"] == "unknown"}
    assert unknown == victims_rows
    assert len(unknown) == 10
    assert collections.Counter(row["status"] for row in rows)["verified"] == KILL_ROWS - 10
    # The 40 it handed back were sent once, by the first worker.
    assert sends(service) == collections.Counter(phones)
