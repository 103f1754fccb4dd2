"""`verif-client bulk` against a careless operator and a service that errs, in subprocesses.

A wrong password (or a service nobody can reach) stops a job at once and
keeps its rows; a full filesystem is the journal's exit status, 3; a service
that gives two sends one request id never verifies a row with another row's
answer; a dead stderr (``2>&1 | tee`` killed by the same Ctrl-C) never costs
a row; ``bulk status``/``export`` never write to a file that is not a
journal; and ``--metrics-linger`` keeps the final counts scrapeable.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from relsupport import PASSWORD, USER
from test_bulk_cli import Job, finish, texted

from verif_client import bulk
from verif_client.simulator import Script, Simulator, SimulatorConfig, serve_in_thread

VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"


@pytest.fixture
def simulator() -> Iterator[tuple[Simulator, str]]:
    config = SimulatorConfig(latency=0.01, script=Script(pending_polls=0))
    simulator = Simulator(credentials=(USER, PASSWORD), config=config)
    with serve_in_thread(simulator) as server:
        yield simulator, server.base_url


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
    assert states.count("unknown") <= 5
    assert states.count("verified") == 300 - states.count("unknown")
    assert max(texted(sim).values()) == 1
