"""Rows finished per second by ``verif-client bulk run`` with a SQLite journal.

The worker is a process of its own, against the simulator served on loopback
by a process of its own (every request verified at its first poll, no rate
limit).

    python benchmarks/bench_journal.py [--rows 3000]

The input is loaded before the clock starts: the figure is the work of
sending, polling and recording, from the first worker's start to the last
worker's exit. On a machine with few cores the workers, the simulator and
the database share them, which bounds what more workers can add.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator

from verif_client import Binding
from verif_client.bulk._input import load_input
from verif_client.bulk._job import BulkOptions
from verif_client.bulk._journal import open_journal

CLI = (sys.executable, "-m", "verif_client._cli")
QUESTION = "Did you ask to pay $25 to ACME?"


def numbers(rows: int) -> bytes:
    return ("phone_number\n" + "".join(f"555{i:07d}\n" for i in range(rows))).encode()


@contextlib.contextmanager
def simulator() -> Iterator[str]:
    """The simulator in its own process; yields its base URL."""
    process = subprocess.Popen(
        [*CLI, "simulate", "--port", "0", "--pending-polls", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        match = re.search(r"(http://[^/\s]+)", process.stdout.readline())
        if match is None:
            raise RuntimeError("the simulator did not say where it listens")
        yield match.group(1)
    finally:
        process.terminate()
        process.wait(timeout=10)


def run_job(location: str, data: bytes, workers: int, base_url: str, scratch: str) -> float:
    """Load the job, then time ``workers`` processes finishing it; rows per second."""
    journal = open_journal(location)
    try:
        load_input(journal, data, BulkOptions(question=QUESTION), Binding.SOAP11)
        rows = sum(journal.counts().values())
    finally:
        journal.close()
    env = {**os.environ, "VERIF_BASE_URL": base_url}
    env.update(VERIF_API_USERNAME="bench", VERIF_API_PASSWORD="bench")
    started = time.perf_counter()
    command = [*CLI, "bulk", "run", "--journal", location, "--concurrency", "50", "--output"]
    processes = [
        subprocess.Popen(
            [*command, os.path.join(scratch, f"{uuid.uuid4().hex}.jsonl")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(workers)
    ]
    for process in processes:
        _, errors = process.communicate(timeout=600)
        if process.returncode:
            raise RuntimeError(f"a worker failed: {errors.decode()[-2000:]}")
    return rows / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000)
    args = parser.parse_args()
    data = numbers(args.rows)
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory())
        base_url = stack.enter_context(simulator())
        results = [("sqlite", 1, run_job(f"{scratch}/job.sqlite", data, 1, base_url, scratch))]
    print(f"{args.rows} rows, {os.cpu_count()} cores, simulator on loopback, no rate limit")
    print(f"{'journal':<12}{'workers':>8}{'rows/s':>10}")
    for journal, workers, rate in results:
        print(f"{journal:<12}{workers:>8}{rate:>10.0f}")


if __name__ == "__main__":
    main()
