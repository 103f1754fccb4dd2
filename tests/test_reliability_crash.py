"""Bulk crash safety at the process level: `verif-client bulk run` is killed
with SIGKILL at several points and resumed.

The simulator serves on loopback from a thread of the test process, so its
request log is the ground truth of what reached the "service". A kill point is
an SMS request of that log: the simulator holds back its answers from that
request on, so the worker is killed with SMS requests sent and unanswered (the
journal's ``sending`` rows) whatever the machine's load, and cannot finish the
job before the kill.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from relsupport import PASSWORD, SEND, USER, HoldingService, serve_holding

from verif_client.simulator import Script, Simulator, SimulatorConfig

ROWS = 120


@pytest.fixture
def service() -> Iterator[HoldingService]:
    config = SimulatorConfig(script=Script(pending_polls=0))
    with serve_holding(Simulator(credentials=(USER, PASSWORD), config=config)) as service:
        yield service


def write_input(path: Path, rows: int) -> list[str]:
    phones = [f"512{n:07d}" for n in range(rows)]
    path.write_text("phone_number,id\n" + "".join(f"{p},user-{p}\n" for p in phones))
    return phones


class Job:
    """One bulk job's files and the command that runs it."""

    def __init__(self, tmp_path: Path, base_url: str, rows: int) -> None:
        self.dir = tmp_path
        self.input = tmp_path / "numbers.csv"
        self.journal = tmp_path / "job.journal"
        self.output = tmp_path / "out.jsonl"
        self.phones = write_input(self.input, rows)
        self.env = {
            **os.environ,
            "VERIF_BASE_URL": base_url,
            "VERIF_API_USERNAME": USER,
            "VERIF_API_PASSWORD": PASSWORD,
        }
        self.runs = 0

    def start(self, *extra: str) -> subprocess.Popen[bytes]:
        self.runs += 1
        command = [
            sys.executable,
            "-m",
            "verif_client._cli",
            "bulk",
            "run",
            "--input",
            str(self.input),
            "--journal",
            str(self.journal),
            "--output",
            str(self.output),
            "--question",
            "Is this you?",
            "--deadline",
            "30s",
            "--concurrency",
            "8",
            *extra,
        ]
        out = open(self.dir / f"run{self.runs}.stdout", "wb")  # noqa: SIM115
        err = open(self.dir / f"run{self.runs}.stderr", "wb")  # noqa: SIM115
        with out, err:
            return subprocess.Popen(command, env=self.env, stdout=out, stderr=err)

    def states(self) -> dict[int, str]:
        with sqlite3.connect(self.journal) as db:
            return dict(db.execute("SELECT line, state FROM rows"))

    def outputs(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.output.read_text().splitlines()]

    def every_file_byte(self) -> bytes:
        return b"".join(path.read_bytes() for path in self.dir.iterdir() if path.is_file())


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """A bounded wait for something observable (the bound only ends a hung test)."""
    deadline = time.monotonic() + 120
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.005)


def kill_in_flight(job: Job, service: HoldingService, after: int) -> set[int]:
    """Run the job until the ``after``-th SMS, kill it with the SMS requests
    that follow still unanswered; return the lines it had in flight."""
    service.hold_sms_answers(after=after)
    process = job.start()
    # The request after the ``after``-th is one whose row stays "sending".
    wait_until(
        lambda: process.poll() is not None or len(service.app.calls(SEND)) > after,
        f"SMS request {after + 1}",
    )
    assert process.poll() is None, "the run ended before the kill point"
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=60) == -signal.SIGKILL
    caught = {line for line, state in job.states().items() if state == "sending"}
    service.release_sms_answers()
    return caught


def finish(process: subprocess.Popen[bytes], status: int = 0) -> None:
    """The run ends by itself: 0, or 4 when rows ended failed or unknown."""
    assert process.wait(timeout=120) == status


def test_killed_three_times_and_resumed(tmp_path: Path, service: HoldingService) -> None:
    job = Job(tmp_path, service.base_url, ROWS)
    in_flight: set[int] = set()
    for kill_point in (10, 45, 90):
        caught = kill_in_flight(job, service, kill_point)
        assert caught, f"the kill after SMS {kill_point} caught no row in flight"
        in_flight |= caught
    finish(job.start(), status=4)
    simulator = service.app

    rows = job.outputs()
    assert sorted(row["line"] for row in rows) == list(range(2, ROWS + 2))
    texted = Counter(call.params["PhoneNumber"] for call in simulator.calls(SEND))
    assert max(texted.values()) == 1, "a row was texted twice"
    status = {row["line"]: row["status"] for row in rows}
    # Rows caught in flight are reported unknown, never resent.
    assert {status[line] for line in in_flight} == {"unknown"}
    unknown = {line for line, state in status.items() if state == "unknown"}
    assert unknown == in_flight
    for line in in_flight:
        assert texted[job.phones[line - 2]] <= 1
    assert {state for line, state in status.items() if line not in in_flight} == {"verified"}
    # All rows reached; the other states are all final.
    assert sum(texted.values()) >= ROWS - len(in_flight)
    assert PASSWORD.encode() not in job.every_file_byte()


def test_resend_unknown_sends_the_rows_in_flight_again(
    tmp_path: Path, service: HoldingService
) -> None:
    simulator = service.app
    job = Job(tmp_path, service.base_url, 40)
    in_flight = kill_in_flight(job, service, 12)
    assert in_flight
    finish(job.start("--resend-unknown"))

    status = {row["line"]: row["status"] for row in job.outputs()}
    assert sorted(status) == list(range(2, 42))
    assert set(status.values()) == {"verified"}
    texted = Counter(call.params["PhoneNumber"] for call in simulator.calls(SEND))
    for line in in_flight:
        assert 1 <= texted[job.phones[line - 2]] <= 2
    others = set(range(2, 42)) - in_flight
    assert all(texted[job.phones[line - 2]] == 1 for line in others)


def test_a_csv_full_of_bad_rows(tmp_path: Path, service: HoldingService) -> None:
    simulator = service.app
    job = Job(tmp_path, service.base_url, 0)
    job.input.write_text(
        "phone_number,id,question\n"
        "5125550100,good-1,\n"  # line 2: good
        "51255,short,\n"  # 3: 5 digits
        ",empty,\n"  # 4: no number
        "5125550100,dup,\n"  # 5: duplicate of line 2
        "5125550101,extra,Q?,surplus\n"  # 6: too many fields
        "(512) 555-0102,punct,\n"  # 7: not digits
        "\uff15125550103,fullwidth,\n"  # 8: not ASCII digits
        "5125550104,long," + "x" * 400 + "\n"  # 9: question too long
        "5125550105,good-2,Is it you?\n"  # 10: good
    )
    finish(job.start())
    rows = {row["line"]: row for row in job.outputs()}
    assert sorted(rows) == list(range(2, 11))
    assert {line for line, row in rows.items() if row["status"] == "verified"} == {2, 10}
    for line in range(3, 10):
        assert rows[line]["status"] == "invalid", rows[line]
        assert rows[line]["reason"], rows[line]
    assert "first on line 2" in str(rows[5]["reason"])
    assert "fields" in str(rows[6]["reason"])
    assert "empty" in str(rows[4]["reason"])
    texted = sorted(call.params["PhoneNumber"] for call in simulator.calls(SEND))
    assert texted == ["5125550100", "5125550105"]
