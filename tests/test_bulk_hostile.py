"""`verif-client bulk` against a careless operator and a service that errs, in subprocesses.

A wrong password (or a service nobody can reach) stops a job at once and
keeps its rows; a full filesystem is the journal's exit status, 3; a service
that gives two sends one request id never verifies a row with another row's
answer; a dead stderr (``2>&1 | tee`` killed by the same Ctrl-C) never costs
a row; ``bulk status``/``export`` never write to a file that is not a
journal; and ``--metrics-linger`` keeps the final counts scrapeable.
"""

from __future__ import annotations

import os
import pty
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import asmx
import pytest
from relsupport import PASSWORD, read_body
from test_bulk_cli import SEND, Job, finish, simulator, texted, wait_until

import verif_client as vc
from verif_client import bulk
from verif_client.simulator import Script, Simulator, SimulatorConfig, serve_in_thread

VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"
__all__ = ["simulator"]  # a fixture, used by name


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verif_client._cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _states(job: Job) -> list[str]:
    return sorted(state for state, _ in job.states().values())


# -- item 13: a wrong password, an unreachable service ---------------------------


def test_a_wrong_password_stops_a_300_row_job_at_once_and_a_rerun_carries_on(
    tmp_path: Path, simulator: tuple[Simulator, str]
) -> None:
    sim, base_url = simulator
    job = Job(tmp_path, base_url, [f"512{n:07d}" for n in range(300)], "soap11")
    job.env["VERIF_API_PASSWORD"] = "not-the-password"
    process = job.start("--concurrency", "20")
    message = finish(process, 1)
    lines = [line for line in message.splitlines() if line.startswith("verif-client:")]
    assert len(lines) == 1, message
    assert "credentials" in lines[0].lower()
    refused = len(sim.calls(SEND))
    assert refused <= 20, "stopped at once: at most the sends already in flight"
    assert _states(job) == ["queued"] * 300, "every row stays queued for the rerun"
    job.env["VERIF_API_PASSWORD"] = PASSWORD
    finish(job.start("--concurrency", "20"), 0)
    assert _states(job) == ["verified"] * 300
    rerun = Counter(str(call.params["PhoneNumber"]) for call in sim.calls(SEND)[refused:])
    assert len(rerun) == 300
    assert max(rerun.values()) == 1


def test_a_service_nobody_can_reach_stops_the_job_with_its_rows_queued(tmp_path: Path) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # closed again: connections are refused
    job = Job(tmp_path, f"http://127.0.0.1:{port}", [f"513{n:07d}" for n in range(50)], "soap11")
    message = finish(job.start("--concurrency", "5"), 1)
    assert len([line for line in message.splitlines() if line.startswith("verif-client:")]) == 1
    assert _states(job) == ["queued"] * 50


class Refusing:
    """HTTP POST: refuses (400, a refusal written out) every number ending in 7."""

    def __init__(self) -> None:
        self.refuse = True
        self.sms = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        op = vc.get_operation(scope["path"].rsplit("/", 1)[-1])
        if op.name == SEND:
            self.sms += 1
            if self.refuse and b"7&" in body + b"&":
                await _answer(send, 400, b"System.ArgumentException: PhoneNumber refused.")
                return
            content = f"<SecureLinkRequestId>{4294967297 + self.sms}</SecureLinkRequestId>"
        else:
            content = "<Verified>true</Verified>"
        await _answer(send, 200, asmx.response(vc.Binding.HTTP_POST, op, content))


async def _answer(send: Any, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"text/xml; charset=utf-8")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def test_resend_failed_sends_again_only_the_rows_the_service_refused(tmp_path: Path) -> None:
    app = Refusing()
    with serve_in_thread(app) as server:
        job = Job(tmp_path, server.base_url, ["5125550101", "5125550107"], "http-post")
        finish(job.start(), 4)
        assert _states(job) == ["failed", "verified"]
        app.refuse = False
        finish(job.start(), 4)
        assert app.sms == 2, "without --resend-failed nothing is sent again"
        finish(job.start("--resend-failed"), 0)
    assert app.sms == 3, "only the refused row was sent again"
    assert _states(job) == ["verified", "verified"]


# -- item 3: one request id for two sends ------------------------------------------


class OneId:
    """SOAP 1.1: every SMS gets request id 7; id 7 is verified."""

    def __init__(self) -> None:
        self.sms = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        if SEND.encode() in body:
            self.sms += 1
            op, content = vc.SEND_CONFIRMATION_SMS, "<SecureLinkRequestId>7</SecureLinkRequestId>"
        else:
            op, content = vc.HAS_BEEN_VERIFIED, "<Verified>true</Verified>"
        await _answer(send, 200, asmx.response(vc.Binding.SOAP11, op, content))


def test_a_request_id_given_twice_never_verifies_the_second_row(tmp_path: Path) -> None:
    app = OneId()
    with serve_in_thread(app) as server:
        job = Job(tmp_path, server.base_url, [f"516{n:07d}" for n in range(5)], "soap11")
        message = finish(job.start("--concurrency", "1"), 4)
        assert "another process" not in message
        assert _states(job) == ["unknown"] * 4 + ["verified"]
        rows = job.outputs()
        unknown = [row for row in rows.values() if row["status"] == "unknown"]
        assert all("request id 7" in row["reason"] for row in unknown), unknown
        # A rerun neither crashes nor credits the answer to another row.
        finish(job.start("--concurrency", "1"), 4)
        assert _states(job) == ["unknown"] * 4 + ["verified"]
    assert app.sms == 5


# -- item 2: a full filesystem -----------------------------------------------------


def test_a_journal_that_fills_the_disk_mid_run_exits_3_with_the_cause(
    tmp_path: Path, simulator: tuple[Simulator, str]
) -> None:
    sim, base_url = simulator
    job = Job(tmp_path, base_url, [f"517{n:07d}" for n in range(300)], "soap11")
    # The job is loaded first, so that the disk fills during the run, not the load.
    journal = bulk.open_journal(str(job.journal))
    journal.load(bulk.read_input(job.input.read_bytes(), "Is this you?"), "loaded-by-the-test")
    journal.close()
    # A file size limit plays a full disk: the journal and its write-ahead log
    # may grow 256 KiB past the loaded journal's size, a few dozen rows' worth.
    limit = job.journal.stat().st_size + 256 * 1024
    command = job.command("--concurrency", "5")
    at = command.index("--input")
    del command[at : at + 2]  # a loaded journal resumes without its input

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    process = subprocess.Popen(
        command,
        env=job.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=limited,
    )
    message = finish(process, 3)
    assert "internal error" not in message
    assert str(job.journal) in message
    assert "queued" in _states(job), "the disk filled before the end"
    # With room again, the same command finishes the job, texting no one
    # twice: only a send in flight when the journal failed is unknown.
    rerun = subprocess.Popen(command, env=job.env, stderr=subprocess.PIPE)
    rerun.communicate(timeout=120)
    states = _states(job)
    assert rerun.returncode == (4 if "unknown" in states else 0)
    # Unknown: rows marked in flight (5 at a time) when the journal failed,
    # and those whose answers it could not record; never more than a few.
    assert states.count("unknown") <= 10
    assert states.count("verified") == 300 - states.count("unknown")
    assert max(texted(sim).values()) == 1


# -- item 5: a file that is not a journal --------------------------------------------


@pytest.mark.parametrize("command", ["status", "export"])
def test_status_and_export_never_write_to_a_database_that_is_not_a_journal(
    tmp_path: Path, command: str
) -> None:
    app_db = tmp_path / "app.db"
    with sqlite3.connect(app_db) as db:
        db.execute("CREATE TABLE users (name TEXT)")
        db.execute("INSERT INTO users VALUES ('ada')")
    db.close()
    before = app_db.read_bytes()
    extra = ["--output", str(tmp_path / "out.jsonl")] if command == "export" else []
    done = _cli("bulk", command, "--journal", str(app_db), *extra)
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1
    assert "not a" in done.stderr
    assert app_db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_status_reads_a_journal_it_cannot_write(
    tmp_path: Path, simulator: tuple[Simulator, str]
) -> None:
    _, base_url = simulator
    job = Job(tmp_path, base_url, ["5125550100", "5125550101"], "soap11")
    finish(job.start(), 0)
    before = job.journal.read_bytes()
    job.journal.chmod(0o444)
    try:
        done = _cli("bulk", "status", "--journal", str(job.journal))
    finally:
        job.journal.chmod(0o644)
    assert done.returncode == 0, done.stderr
    assert "verified" in done.stdout
    assert job.journal.read_bytes() == before


# -- item 4: a dead stderr ---------------------------------------------------------


@pytest.mark.parametrize("reader", ["pipe", "pty"])
def test_ctrl_c_through_an_output_whose_reader_died_costs_no_row(
    tmp_path: Path, simulator: tuple[Simulator, str], reader: str
) -> None:
    sim, base_url = simulator
    sim.config = SimulatorConfig(latency=0.8, script=Script(pending_polls=0))
    job = Job(tmp_path, base_url, [f"518{n:07d}" for n in range(60)], "soap11")
    # pipe: `2>&1 | tee run.log`, stdout and stderr one pipe read by the test;
    # pty: a terminal whose window is closed (writes then fail with EIO).
    read, write = os.pipe() if reader == "pipe" else pty.openpty()
    process = job.start("--concurrency", "20", stdout=write, stderr=write)
    os.close(write)
    os.read(read, 65536)  # the run has started writing
    wait_until(lambda: _states(job).count("sending") == 20, process)
    # Ctrl-C reaches the reader and the job at once: the reader is gone first.
    os.close(read)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=120)
    assert process.returncode == 130
    states = job.states()
    assert not [line for line, (state, _) in states.items() if state == "unknown"]
    sent = [request_id for state, request_id in states.values() if state == "sent"]
    assert len(sent) >= 20, "the sends in flight were recorded with their request ids"
    assert all(request_id is not None for request_id in sent)


# -- item 15: metrics of a short job ---------------------------------------------------


def test_the_final_counts_stay_scrapeable_for_the_linger_period(
    tmp_path: Path, simulator: tuple[Simulator, str]
) -> None:
    pytest.importorskip("prometheus_client")
    _, base_url = simulator
    job = Job(tmp_path, base_url, [f"519{n:07d}" for n in range(30)], "soap11")
    process = job.start("--metrics-port", "0", "--metrics-linger", "120s")
    assert process.stderr is not None
    first = process.stderr.readline().decode()
    assert first.startswith("metrics: http://"), first
    url = first.split()[1]
    wait_until(lambda: _states(job) == ["verified"] * 30, process)
    wait_until(lambda: 'verif_client_job_rows{state="verified"} 30.0' in _scrape(url), process)
    page = _scrape(url)
    assert 'verif_client_job_rows{state="pending"} 0.0' in page
    # The linger ends with a signal, and the job's own status.
    process.send_signal(signal.SIGTERM)
    finish(process, 0)


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read().decode())
