"""The Temporal dev server helper starts when a port it handed the server is taken
from under it, as another process can between the choice and the server's bind:
on fresh ports at first, and on a restart on the same address and database.

The real ``temporal`` binary serves; a port is taken by a listener of the
test's own, bound with SO_REUSEADDR (as most servers bind), which the
reservation's TIME_WAIT does not keep out.
"""

from __future__ import annotations

import errno
import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from realparts import missing_real_part
from temporalserver import HOST, IN_USE, DevServer, ServerUnavailable, reserve_port, temporal_binary


class Taking:
    """A ``pick_port`` that, once armed, takes the next port it picks before handing it over."""

    def __init__(self) -> None:
        self.armed = False
        self.listeners: list[socket.socket] = []

    def __call__(self) -> int:
        port = reserve_port()
        if self.armed:
            self.armed = False
            listener = socket.socket()
            self.listeners.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((HOST, port))
            listener.listen()
        return port

    @property
    def taken(self) -> int:
        (listener,) = self.listeners
        return int(listener.getsockname()[1])


@pytest.fixture
def binary() -> str:
    try:
        return temporal_binary()
    except ServerUnavailable as exc:
        missing_real_part(str(exc))


@pytest.fixture
def taking() -> Iterator[Taking]:
    taking = Taking()
    yield taking
    for listener in taking.listeners:
        listener.close()


def temporal(binary: str, server: DevServer, *args: str) -> Any:
    done = subprocess.run(
        [binary, *args, "--address", server.address, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("other", [HOST, "0.0.0.0"])
def test_a_reserved_port_is_kept_from_other_binds_but_not_from_the_server(other: str) -> None:
    port = reserve_port()
    # A plain bind is refused: so is a bind to port 0, which checks the same, stricter.
    with socket.socket() as plain, pytest.raises(OSError, match="in use") as refused:
        plain.bind((other, port))
    assert refused.value.errno == errno.EADDRINUSE
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((HOST, port))
        server.listen()


def test_a_port_taken_at_the_first_start_moves_the_server(
    binary: str, taking: Taking, tmp_path: Path
) -> None:
    taking.armed = True  # the frontend's port: the first one picked
    server = DevServer(tmp_path / "t.db", tmp_path / "t.log", pick_port=taking)
    try:
        server.start()
        log = server.log.read_text()
        assert f"can't set frontend port {taking.taken}" in log
        assert IN_USE in log
        assert server.address == f"{HOST}:{server.port}"
        assert server.port != taking.taken
        # It serves: a workflow is started, and described from its history.
        started = temporal(
            binary, server, "workflow", "start", "--type", "Moved", "--task-queue", "q"
        )
        started_id = started["workflowId"]
        described = temporal(binary, server, "workflow", "describe", "-w", started_id)
    finally:
        server.stop()
    assert described["workflowExecutionInfo"]["type"]["name"] == "Moved"


def test_a_port_taken_at_a_restart_keeps_the_address_and_the_database(
    binary: str, taking: Taking, tmp_path: Path
) -> None:
    server = DevServer(tmp_path / "t.db", tmp_path / "t.log", pick_port=taking)
    try:
        server.start()
        address = server.address
        started = temporal(
            binary, server, "workflow", "start", "--type", "Kept", "--task-queue", "q"
        )
        server.kill()
        taking.armed = True  # the HTTP port: a restart keeps the frontend's
        server.start()
        assert server.address == address
        log = server.log.read_text()
        assert f"can't set frontend HTTP port {taking.taken}" in log
        assert IN_USE in log
        described = temporal(binary, server, "workflow", "describe", "-w", started["workflowId"])
    finally:
        server.stop()
    execution = described["workflowExecutionInfo"]
    assert execution["execution"]["runId"] == started["runId"]
    assert execution["status"] == "WORKFLOW_EXECUTION_STATUS_RUNNING"


def test_a_server_that_fails_for_another_reason_is_not_started_again(
    binary: str, tmp_path: Path
) -> None:
    server = DevServer(tmp_path / "missing" / "t.db", tmp_path / "t.log")
    with pytest.raises(ServerUnavailable, match="would not start") as raised:
        server.start()
    assert "failed checking dir for database file" in str(raised.value)
    assert server.log.read_text().count("Error:") == 1
