"""A sealed Temporal job and the processes that lack its key, attacked from outside.

``VERIF_TEMPORAL_KEY`` seals every payload of a job. A process without it, or
with another, says so in one line naming the variable (exit 3) for ``bulk
run``, ``status``, ``export`` and ``worker``; and a long-lived worker with the
wrong key on a job's shared task queue is never handed a task it cannot read:
the job beside it finishes as if it were absent.
"""

from __future__ import annotations

import collections
import signal
import subprocess
from pathlib import Path

import pytest
from relsupport import HoldingService
from temporalserver import DevServer
from test_bulk_temporal import CLI, Job, numbers, reap, sends, service, temporal_server, wait_for

pytest.importorskip("temporalio")

# The fixtures shared with the other Temporal tests.
__all__ = ["service", "temporal_server"]

KEY = "3c" * 32
OTHER_KEY = "a5" * 32


def test_a_process_without_the_key_says_so_in_one_line(
    temporal_server: DevServer, service: HoldingService, tmp_path: Path
) -> None:
    phones = numbers(tmp_path / "in.csv", 6, prefix="564")
    job = Job(temporal_server, service, tmp_path, "keyed", VERIF_TEMPORAL_KEY=KEY)
    first = job.start("w0", "--input", str(tmp_path / "in.csv"))
    try:
        assert first.wait(timeout=120) == 0, job.log("w0")
    finally:
        reap([first])
    for key, words in ((None, "set VERIF_TEMPORAL_KEY"), (OTHER_KEY, "VERIF_TEMPORAL_KEY")):
        if key is None:
            del job.env["VERIF_TEMPORAL_KEY"]
        else:
            job.env["VERIF_TEMPORAL_KEY"] = key
        output = str(tmp_path / "x.jsonl")
        for command in (
            ("bulk", "status", "--journal", job.url),
            ("bulk", "export", "--journal", job.url, "--output", output),
            ("bulk", "run", "--journal", job.url, "--output", output),
            ("worker", "--journal", job.url),
        ):
            done = job.run(*command)
            assert done.returncode == 3, (key, command, done.stderr)
            assert words in done.stderr, (key, command, done.stderr)
            assert done.stderr.count("\n") == 1, (key, command, done.stderr)
            assert "Traceback" not in done.stderr
    assert sends(service) == collections.Counter(phones)


def test_a_worker_with_another_key_takes_no_task_of_the_job(
    temporal_server: DevServer, service: HoldingService, tmp_path: Path
) -> None:
    phones = numbers(tmp_path / "in.csv", 30, prefix="565")
    job = Job(temporal_server, service, tmp_path, "keyed-shared", VERIF_TEMPORAL_KEY=KEY)
    job.url += "&task_queue=keyed-queue"
    stranger_url = f"temporal://{temporal_server.address}/default?task_queue=keyed-queue"
    log = (tmp_path / "stranger.log").open("wb")
    stranger = subprocess.Popen(
        [*CLI, "worker", "--journal", stranger_url],
        env={**job.env, "VERIF_TEMPORAL_KEY": OTHER_KEY},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: b"serving" in (tmp_path / "stranger.log").read_bytes(), "it up")
        run = job.start("w0", "--input", str(tmp_path / "in.csv"))
        try:
            assert run.wait(timeout=120) == 0, job.log("w0")
        finally:
            reap([run])
        assert stranger.poll() is None  # it serves on, its own key's queue
        stranger.send_signal(signal.SIGTERM)
        assert stranger.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        reap([stranger])
        log.close()
    rows = job.export()
    assert collections.Counter(row["status"] for row in rows) == {"verified": 30}
    assert sends(service) == collections.Counter(phones)
    said = (tmp_path / "stranger.log").read_text()
    assert "Traceback" not in said
    # It never met a payload it could not open.
    assert "VERIF_TEMPORAL_KEY" not in said, said
    assert "error" not in said.lower(), said
