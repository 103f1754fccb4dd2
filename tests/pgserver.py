"""A throwaway PostgreSQL server on loopback, for the tests and the benchmark.

Uses the server binaries of Debian's ``postgresql`` package (or any on PATH).
The server refuses to run as root, so as root it runs as the ``postgres``
user. Everything lives in one temporary directory, removed at the end.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

# Durability against power loss is not what the tests exercise (a killed
# client process is), and fsync would only slow them.
FAST: Mapping[str, str] = {"fsync": "off", "full_page_writes": "off"}


class ServerUnavailable(Exception):
    """No PostgreSQL server can be started here (the message says why)."""


def _bindir() -> str:
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda path: int(path.split("/")[-2])
    )
    for directory in reversed(candidates):
        if os.path.exists(os.path.join(directory, "initdb")):
            return directory
    initdb = shutil.which("initdb")
    if initdb:
        return os.path.dirname(initdb)
    raise ServerUnavailable("no PostgreSQL server binaries (apt-get install postgresql)")


def _as_user() -> tuple[Sequence[str], str | None]:
    """The command prefix that runs the server as a non-root user, and that user."""
    if os.geteuid() != 0:
        return (), None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise ServerUnavailable("running as root and there is no postgres user") from None
    runuser = shutil.which("runuser")
    if runuser is None:
        raise ServerUnavailable("running as root and there is no runuser to drop to postgres")
    return (runuser, "-u", "postgres", "--"), "postgres"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def temporary_server(settings: Mapping[str, str] = FAST) -> Iterator[str]:
    """Start a server; yield the URL of its ``postgres`` database as superuser."""
    bindir = _bindir()
    prefix, user = _as_user()
    directory = tempfile.mkdtemp(prefix="verif-pg-")
    if user is not None:
        shutil.chown(directory, user)
    data = os.path.join(directory, "data")

    def run(*command: str) -> None:
        done = subprocess.run(
            [*prefix, *command], capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode:
            log = Path(directory, "log")
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise ServerUnavailable(
                f"{os.path.basename(command[0])} failed: {done.stderr.strip()} {tail}"
            )

    try:
        run(f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "-N")
        port = _free_port()
        options = [f"-p {port}", f"-k {directory}", "-c listen_addresses=127.0.0.1"]
        options += [f"-c {name}={value}" for name, value in settings.items()]
        run(
            f"{bindir}/pg_ctl",
            *("-D", data, "-l", os.path.join(directory, "log"), "-w", "-t", "60"),
            *("-o", " ".join(options), "start"),
        )
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
        finally:
            run(f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
