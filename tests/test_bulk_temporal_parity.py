"""What a SQLite job does against a careless operator and an erring service, on Temporal too.

A wrong password (or a service nobody can reach) stops the whole job (every
worker of it, in every process) with its rows queued, and a rerun carries on;
a 429 is sent again, never failed; a request id the service gives two rows
makes the second ``unknown``, whichever batches they are in;
``--resend-failed`` sends again the rows the service refused. Each runs
``verif-client bulk run`` processes on a real dev server (see
test_bulk_temporal) against the simulator or a peer of the test's own, whose
request log is the truth of what was sent.
"""

from __future__ import annotations

import collections
import itertools
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from relsupport import SEND, serve_holding
from temporalserver import DevServer
from test_bulk_429 import WAIT, SlowDown
from test_bulk_hostile import OneId
from test_bulk_hostile import Refusing as RefusingSevens
from test_bulk_temporal import PASSWORD, Job, numbers, reap, temporal_server, wait_for

from verif_client.simulator import Script, Simulator, SimulatorConfig, serve_in_thread

pytest.importorskip("temporalio")

__all__ = ["temporal_server"]  # a fixture, used by name


def messages(job: Job, name: str) -> list[str]:
    return [line for line in job.log(name).splitlines() if line.startswith("verif-client:")]


def statuses(job: Job) -> collections.Counter[str]:
    return collections.Counter(row["status"] for row in job.export())


def test_refused_credentials_stop_every_worker_and_a_rerun_carries_on(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    config = SimulatorConfig(script=Script(pending_polls=0))
    simulator = Simulator(credentials=("bulk", PASSWORD), config=config)
    with serve_holding(simulator) as service:
        phones = numbers(tmp_path / "in.csv", 60, prefix="541")
        job = Job(temporal_server, service, tmp_path, "refused")
        # The job's rate keeps it under way, far from done, when the wrong password joins.
        good = job.start("good", "--input", str(tmp_path / "in.csv"), "--rate", "4")
        bad = None
        try:
            wait_for(lambda: len(simulator.secure_links) >= 2, "the job under way")
            job.env["VERIF_API_PASSWORD"] = "not-the-password"
            bad = job.start("bad", "--concurrency", "5")
            # Both stop: the one whose sends were refused and the one they were not.
            assert bad.wait(timeout=120) == 1, job.log("bad")
            assert good.wait(timeout=120) == 1, job.log("good")
        finally:
            reap([good, *([bad] if bad else [])])
        for name in ("bad", "good"):
            lines = messages(job, name)
            assert len(lines) == 1, job.log(name)
            assert "refused the credentials" in lines[0]
            assert "stay queued" in lines[0]
            assert "Traceback" not in job.log(name)
        refused = len(simulator.calls(SEND)) - len(simulator.secure_links)
        assert 1 <= refused <= 5, "stopped at once: at most the wrong worker's sends in flight"
        texted_first = len(simulator.secure_links)
        assert texted_first < 60
        # No row failed: those not texted wait, queued, for the rerun.
        for name in ("bad", "good"):
            outputs = (tmp_path / f"{name}.jsonl").read_text()
            assert '"failed"' not in outputs
            assert '"unknown"' not in outputs

        job.env["VERIF_API_PASSWORD"] = PASSWORD
        again = job.start("again")
        try:
            assert again.wait(timeout=120) == 0, job.log("again")
        finally:
            reap([again])
        assert statuses(job) == {"verified": 60}
        # Every number texted once, before the stop or after it.
        texted = collections.Counter(link.phone_number for link in simulator.secure_links)
        assert texted == collections.Counter(phones)
        assert len(simulator.calls(SEND)) == 60 + refused


def test_a_service_nobody_can_reach_stops_the_job_and_a_rerun_carries_on(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # closed again: connections are refused
    phones = numbers(tmp_path / "in.csv", 30, prefix="544")
    nowhere = SimpleNamespace(base_url=f"http://127.0.0.1:{port}")
    job = Job(temporal_server, nowhere, tmp_path, "nowhere")  # type: ignore[arg-type]
    worker = job.start("w0", "--input", str(tmp_path / "in.csv"), "--concurrency", "5")
    try:
        assert worker.wait(timeout=120) == 1, job.log("w0")
    finally:
        reap([worker])
    (line,) = messages(job, "w0")
    assert "could not be reached" in line
    assert (tmp_path / "w0.jsonl").read_text() == "", "no row failed"
    with serve_holding(Simulator(config=SimulatorConfig(script=Script(pending_polls=0)))) as sim:
        job.env["VERIF_BASE_URL"] = sim.base_url
        again = job.start("again")
        try:
            assert again.wait(timeout=120) == 0, job.log("again")
        finally:
            reap([again])
        assert collections.Counter(link.phone_number for link in sim.app.secure_links) == (
            collections.Counter(phones)
        )
    assert statuses(job) == {"verified": 30}


@pytest.fixture
def slow_down() -> Iterator[tuple[SlowDown, SimpleNamespace]]:
    gate = SlowDown(Simulator(config=SimulatorConfig(script=Script(pending_polls=0))), set())
    with serve_in_thread(gate) as server:
        yield gate, SimpleNamespace(base_url=server.base_url)


def test_rows_refused_with_429_are_sent_again_after_retry_after(
    temporal_server: DevServer, tmp_path: Path, slow_down: tuple[SlowDown, SimpleNamespace]
) -> None:
    gate, service = slow_down
    phones = numbers(tmp_path / "in.csv", 4, prefix="542")
    # One number, refused past the client's retries: the client slows every
    # request down after each 429, so more would only make the test long.
    gate.refused = {phones[1]}
    job = Job(temporal_server, service, tmp_path, "slow-down")  # type: ignore[arg-type]
    worker = job.start("w0", "--input", str(tmp_path / "in.csv"))
    try:
        assert worker.wait(timeout=120) == 0, job.log("w0")
    finally:
        reap([worker])
    assert statuses(job) == {"verified": 4}
    texted = collections.Counter(link.phone_number for link in gate.simulator.secure_links)
    assert texted == collections.Counter(phones)
    for phone in gate.refused:
        attempts = [(at, status) for at, number, status in gate.log if number == phone]
        # Past the client's own retries: the job sent the row again, and again, ...
        assert [status for _, status in attempts] == [429] * 5 + [200]
        # ... never before the service's Retry-After.
        gaps = [later - at for (at, _), (later, _) in itertools.pairwise(attempts)]
        assert min(gaps) >= WAIT, gaps


def test_a_request_id_given_twice_never_verifies_the_second_row_across_batches(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    app = OneId()
    with serve_in_thread(app) as server:
        numbers(tmp_path / "in.csv", 5, prefix="543")
        job = Job(temporal_server, SimpleNamespace(base_url=server.base_url), tmp_path, "one-id")  # type: ignore[arg-type]
        job.url += "&batch=2"  # the rows given id 7 are in three batches
        worker = job.start("w0", "--input", str(tmp_path / "in.csv"), "--concurrency", "1")
        try:
            assert worker.wait(timeout=120) == 4, job.log("w0")
            rows = job.export()
            assert collections.Counter(row["status"] for row in rows) == {
                "unknown": 4,
                "verified": 1,
            }
            (first,) = (row["line"] for row in rows if row["status"] == "verified")
            for row in rows:
                if row["status"] == "unknown":
                    assert row["request_id"] == 7
                    assert f"request id 7, which it had already given line {first}" in row["reason"]
                    assert "polls" not in row, "never polled"
            # A rerun neither sends again nor credits the answer to another row.
            again = job.start("again")
            assert again.wait(timeout=120) == 4, job.log("again")
        finally:
            reap([worker])
    assert app.sms == 5
    assert statuses(job) == {"unknown": 4, "verified": 1}


def test_resend_failed_sends_again_only_the_rows_the_service_refused(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    app = RefusingSevens()
    with serve_in_thread(app) as server:
        (tmp_path / "in.csv").write_text("phone_number,id\n5445550101,a\n5445550107,b\n")
        service = SimpleNamespace(base_url=server.base_url)
        job = Job(temporal_server, service, tmp_path, "resend-failed", VERIF_BINDING="http-post")  # type: ignore[arg-type]
        first = job.start("w0", "--input", str(tmp_path / "in.csv"))
        assert first.wait(timeout=120) == 4, job.log("w0")
        assert statuses(job) == {"failed": 1, "verified": 1}
        app.refuse = False
        plain = job.start("plain")
        assert plain.wait(timeout=120) == 4, job.log("plain")
        assert app.sms == 2, "without --resend-failed nothing is sent again"
        resend = job.start("resend", "--resend-failed")
        assert resend.wait(timeout=120) == 0, job.log("resend")
    assert app.sms == 3, "only the refused row was sent again"
    assert statuses(job) == {"verified": 2}


@pytest.mark.parametrize("batch", ["100", "10"], ids=["running-batch", "finished-batch"])
def test_resend_unknown_joins_a_running_job_and_sends_only_the_unknown_rows_again(
    temporal_server: DevServer, tmp_path: Path, batch: str
) -> None:
    with serve_holding(Simulator(config=SimulatorConfig(script=Script.manual()))) as service:
        phones = numbers(tmp_path / "in.csv", 20, prefix="545")
        job = Job(temporal_server, service, tmp_path, f"resend-running-{batch}")
        # With batch=10 the killed worker's rows are a batch of their own, which
        # finishes (all unknown) while the other batch's rows wait for answers.
        job.url += f"&batch={batch}"
        service.hold_sms_answers()
        # One send activity of 10 rows (the job's group: its --concurrency),
        # all 10 in flight: a worker holds no row it is not sending.
        victim = job.start("w0", "--input", str(tmp_path / "in.csv"), "--concurrency", "10")
        workers = [victim]
        try:
            wait_for(lambda: len(service.texted()) == 10, "ten sends in flight")
            in_flight = service.texted()
            victim.send_signal(signal.SIGKILL)
            victim.wait(timeout=60)
            service.release_sms_answers()
            # Its activity's 10 rows end unknown (each may have been texted);
            # the other 10 are sent and wait: the job runs.
            workers.append(job.start("w1"))
            wait_for(lambda: len(service.app.secure_links) == 20, "the other rows sent")
            wait_for(lambda: ["unknown", "10"] in counted(job), "the killed rows unknown")
            workers.append(job.start("w2", "--resend-unknown"))
            wait_for(lambda: len(service.app.secure_links) == 30, "the unknown rows sent again")
            for link in service.app.secure_links:
                service.app.verify(link.request_id)
            for index, worker in enumerate(workers[1:], start=1):
                assert worker.wait(timeout=120) == 0, job.log(f"w{index}")
        finally:
            reap(workers)
        texted = collections.Counter(link.phone_number for link in service.app.secure_links)
    # Only what the operator asked for is sent again: the ten that were in flight.
    assert texted == collections.Counter(phones) + collections.Counter(in_flight)
    assert statuses(job) == {"verified": 20}


def counted(job: Job) -> list[list[str]]:
    status = job.run("bulk", "status", "--journal", job.url)
    return [line.split() for line in status.stdout.splitlines()]


def test_a_request_id_that_cannot_be_checked_leaves_its_row_unknown_not_polled(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    async def close_the_ids_workflow() -> None:
        from temporalio.client import Client

        client = await Client.connect(temporal_server.address)
        # Closed before the job starts: its sends cannot record their ids there.
        handle = await client.start_workflow(
            "verif-client.ids", {}, id="verif-job/unchecked/ids/0", task_queue="nobody-polls"
        )
        await handle.terminate()

    anyio.run(close_the_ids_workflow)
    with serve_holding(Simulator(config=SimulatorConfig(script=Script(pending_polls=0)))) as sim:
        phones = numbers(tmp_path / "in.csv", 3, prefix="546")
        job = Job(temporal_server, sim, tmp_path, "unchecked")
        worker = job.start("w0", "--input", str(tmp_path / "in.csv"))
        try:
            assert worker.wait(timeout=120) == 4, job.log("w0")
        finally:
            reap([worker])
        texted = collections.Counter(link.phone_number for link in sim.app.secure_links)
        polls = len(sim.app.calls()) - len(sim.app.calls(SEND))
    assert texted == collections.Counter(phones)
    rows = job.export()
    assert {row["status"] for row in rows} == {"unknown"}
    assert all("could not be recorded" in row["reason"] for row in rows)
    assert polls == 0


def test_a_refusal_that_echoes_the_password_leaves_it_out_of_temporal_and_the_output(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    # The stop's reason is recorded in the job's workflow for every worker to
    # read: a service that quotes the password in its refusal must not put it
    # there, nor in what the operator sees.
    password = "echoed-Pa55word-7q"

    async def echoing(scope: dict[str, object], receive: object, send: object) -> None:
        if scope["type"] != "http":
            return
        body = f"Invalid API credentials for bulk/{password}".encode()
        headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 401, "headers": headers})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": body})  # type: ignore[operator]

    with serve_in_thread(echoing) as server:
        numbers(tmp_path / "in.csv", 5, prefix="546")
        service = SimpleNamespace(base_url=server.base_url)
        job = Job(temporal_server, service, tmp_path, "echoed", VERIF_API_PASSWORD=password)  # type: ignore[arg-type]
        worker = job.start("w0", "--input", str(tmp_path / "in.csv"))
        try:
            assert worker.wait(timeout=120) == 1, job.log("w0")
        finally:
            reap([worker])
        (line,) = messages(job, "w0")
        assert "refused the credentials" in line
        assert "for bulk/***" in line  # the echo came through, masked
        status = job.run("bulk", "status", "--journal", job.url)
    assert password.encode() not in job.outputs() + (status.stdout + status.stderr).encode()
    stored = b"".join(path.read_bytes() for path in temporal_server.files())
    assert b"for bulk/***" in stored  # the stop's reason is recorded there, masked
    assert password.encode() not in stored
