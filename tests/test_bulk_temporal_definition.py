"""A Temporal job is what its first load made it: input, question and batches, fixed.

Attacked from outside with ``bulk run`` processes against a real dev server:
a rerun asking another question after a crash mid-load (the job's record
written, none of its batches started), and two first runs of one job id with
different inputs at the same moment.
"""

from __future__ import annotations

import collections
import signal
import subprocess
from pathlib import Path

import anyio
import pytest
from relsupport import SEND, HoldingService
from temporalserver import DevServer
from test_bulk_temporal import (
    QUESTION,
    Job,
    numbers,
    reap,
    sends,
    service,
    temporal_server,
    wait_for,
)

from verif_client.simulator import Script

pytest.importorskip("temporalio")

# The fixtures shared with the other Temporal tests.
__all__ = ["service", "temporal_server"]


def crashed_mid_load(server: DevServer, job: str, data: bytes, question: str) -> None:
    """What a first ``bulk run`` killed mid-load leaves: the job's record, no batch."""
    from verif_client.bulk._input import digest, question_digest
    from verif_client.bulk._workflows import JobSpec, JobWorkflow, Polling

    async def load() -> None:
        from temporalio.client import Client

        client = await Client.connect(server.address)
        rows = len(data.splitlines()) - 1
        spec = JobSpec(
            job=job,
            input_digest=digest(data),
            batches=[2 + first for first in range(0, rows, 100)],
            rows=rows,
            polling=Polling(False, 600.0, "pending", 1.0, 2.0, 30.0, 0.1),
            heartbeat=2.0,
            task_queue=f"verif-job/{job}",
            question_digest=question_digest(question),
        )
        await client.start_workflow(
            JobWorkflow.run,
            args=[spec, None],
            id=f"verif-job/{job}",
            task_queue=spec.task_queue,
            memo={"spec": spec},
        )

    anyio.run(load)


def test_a_rerun_after_a_crash_mid_load_keeps_the_jobs_question(
    temporal_server: DevServer, service: HoldingService, tmp_path: Path
) -> None:
    phones = numbers(tmp_path / "in.csv", 12, prefix="561")
    crashed_mid_load(temporal_server, "half-loaded", (tmp_path / "in.csv").read_bytes(), QUESTION)
    job = Job(temporal_server, service, tmp_path, "half-loaded")
    # Another question for the rest of the rows: refused, in one line, before any batch.
    other = job.start("other", "--input", str(tmp_path / "in.csv"), "--question", "Pay $2,500?")
    assert other.wait(timeout=60) == 3, job.log("other")
    assert "another --question" in job.log("other")
    assert job.log("other").count("\n") == 1
    assert not service.texted()
    # The job's own question finishes the load and the job.
    again = job.start("again", "--input", str(tmp_path / "in.csv"))
    try:
        assert again.wait(timeout=120) == 0, job.log("again")
    finally:
        reap([again])
    asked = {call.params["ConfirmationQuestion"] for call in service.app.calls(SEND)}
    assert asked == {QUESTION}
    assert sends(service) == collections.Counter(phones)


def test_two_first_runs_of_one_job_with_different_inputs(
    temporal_server: DevServer, service: HoldingService, tmp_path: Path
) -> None:
    mine = numbers(tmp_path / "mine.csv", 10, prefix="562")
    theirs = numbers(tmp_path / "theirs.csv", 10, prefix="563")
    job = Job(temporal_server, service, tmp_path, "raced")
    runs = [
        job.start("mine", "--input", str(tmp_path / "mine.csv")),
        job.start("theirs", "--input", str(tmp_path / "theirs.csv")),
    ]
    try:
        statuses = sorted(run.wait(timeout=120) for run in runs)
    finally:
        reap(runs)
    # One loads the job and finishes it; the other is refused in one line.
    assert statuses == [0, 3], [job.log("mine"), job.log("theirs")]
    loser = "theirs" if runs[0].returncode == 0 else "mine"
    assert "different input" in job.log(loser)
    assert job.log(loser).count("\n") == 1
    winner = mine if loser == "theirs" else theirs
    # Only the winner's numbers were texted, each once.
    assert sends(service) == collections.Counter(winner)


def test_a_bad_worker_url_is_one_line(temporal_server: DevServer) -> None:
    from test_bulk_temporal import CLI

    # (URL, exit status: 2 a usage error, 3 the journal's; words of the one line)
    cases = [
        ("temporal://127.0.0.1:1/default?task_queue=q", 3, "cannot connect"),
        ("temporal://127.0.0.1:7233/default?task_queue=q&nope=1", 3, "unknown parameter"),
        ("http://127.0.0.1:7233/default", 2, "temporal://"),
        (f"temporal://{temporal_server.address}/no-such-namespace?task_queue=q", 3, "namespace"),
    ]
    for url, status, words in cases:
        done = subprocess.run(
            [*CLI, "worker", "--journal", url],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={
                "VERIF_BASE_URL": "http://127.0.0.1:9",
                "VERIF_API_USERNAME": "u",
                "VERIF_API_PASSWORD": "p",
                "PATH": "/usr/bin:/bin",
            },
        )
        assert done.returncode == status, (url, done.stderr)
        assert words in done.stderr, (url, done.stderr)
        assert done.stderr.count("\n") == 1, (url, done.stderr)


def test_status_and_export_need_no_worker(
    temporal_server: DevServer, service: HoldingService, tmp_path: Path
) -> None:
    phones = numbers(tmp_path / "in.csv", 24, prefix="566")
    for phone in phones[:4]:
        # Pending until the end of the test: the job cannot end.
        service.app.script_for(phone, Script.manual())
    job = Job(temporal_server, service, tmp_path, "no-worker")
    worker = job.start("w0", "--input", str(tmp_path / "in.csv"))
    try:
        wait_for(lambda: len(service.texted()) == 24, "every SMS sent")
        wait_for(lambda: len(job.export()) == 20, "the fast rows finished")
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=60) == -signal.SIGKILL
    finally:
        reap([worker])
    # Nobody polls the job's task queue now: no query could be answered.
    status = job.run("bulk", "status", "--journal", job.url)
    assert status.returncode == 0, status.stderr
    lines = [line.split() for line in status.stdout.splitlines()]
    assert ["verified", "20"] in lines
    assert lines[-1] == ["total", "24"]
    rows = job.export()
    assert sorted(row["phone_number"] for row in rows) == sorted(phones[4:])


def batch_ids(server: DevServer, job: str, candidates: range) -> list[int]:
    """The first lines of ``job``'s batches among ``candidates``."""
    import temporalio.client
    import temporalio.service

    async def look() -> list[int]:
        client = await temporalio.client.Client.connect(server.address)
        found = []
        for first in candidates:
            try:
                await client.get_workflow_handle(f"verif-job/{job}/rows/{first}").describe()
            except temporalio.service.RPCError as exc:
                if exc.status != temporalio.service.RPCStatusCode.NOT_FOUND:
                    raise
                continue
            found.append(first)
        return found

    return anyio.run(look)


@pytest.mark.parametrize(
    ("args", "batches"),
    [
        (("--concurrency", "50"), [2, 202]),  # groups of 50: batches of 200
        (("--concurrency", "10"), [2, 102, 202]),  # groups of 10: batches of 100 at least
        (("--concurrency", "50", "&batch=120"), [2, 122, 242]),  # the URL's own
    ],
    ids=["four-groups", "at-least-100", "url"],
)
def test_a_jobs_batches_hold_four_send_groups_unless_the_url_says(
    temporal_server: DevServer,
    service: HoldingService,
    tmp_path: Path,
    args: tuple[str, ...],
    batches: list[int],
) -> None:
    numbers(tmp_path / "in.csv", 250, prefix="564")
    name = f"batches-{args[1]}-{len(args)}"
    job = Job(temporal_server, service, tmp_path, name)
    job.url += "".join(arg for arg in args if arg.startswith("&"))
    run = job.start("run", "--input", str(tmp_path / "in.csv"), *args[:2])
    try:
        assert run.wait(timeout=120) == 0, job.log("run")
    finally:
        reap([run])
    assert batch_ids(temporal_server, name, range(2, 252, 10)) == batches


def test_a_rerun_after_a_crash_mid_load_keeps_the_jobs_batches(
    temporal_server: DevServer, service: HoldingService, tmp_path: Path
) -> None:
    # Loaded in batches of 100, crashed before any started; the rerun's
    # --concurrency 50 would make batches of 200 for a job of its own.
    phones = numbers(tmp_path / "in.csv", 250, prefix="565")
    data = (tmp_path / "in.csv").read_bytes()
    crashed_mid_load(temporal_server, "rebatched", data, QUESTION)
    job = Job(temporal_server, service, tmp_path, "rebatched")
    again = job.start("again", "--input", str(tmp_path / "in.csv"), "--concurrency", "50")
    try:
        assert again.wait(timeout=120) == 0, job.log("again")
    finally:
        reap([again])
    assert batch_ids(temporal_server, "rebatched", range(2, 252, 10)) == [2, 102, 202]
    assert sends(service) == collections.Counter(phones)
