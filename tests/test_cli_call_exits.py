"""``verif-client call``: an input mistake exits 2 and sends nothing.

README (Errors and exit status): 2 is the user's mistake, 1 the service's or
the network's. An invalid phone number, a missing parameter or an unknown
operation is found before anything is sent: the listening socket here must
see no connection. Short operation names (a unique tail of the wire name)
are accepted.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from relsupport import run_cli

from verif_client.simulator import Simulator, serve_in_thread


@pytest.fixture
def listening() -> Iterator[tuple[socket.socket, str]]:
    """A port that takes connections into its backlog; nobody answers."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        yield server, f"http://127.0.0.1:{server.getsockname()[1]}"


def _connections(server: socket.socket) -> int:
    count = 0
    while True:
        try:
            server.accept()[0].close()
        except BlockingIOError:
            return count
        count += 1


MISTAKES = {
    "bad-phone": [
        "SecureLink_Confirmation_SendRequestViaSms",
        "PhoneNumber=12",
        "ConfirmationQuestion=Is this you?",
    ],
    "missing-request-id": ["SecureLink_SecurityCode_HasBeenVerified"],
    "unknown-operation": ["SecureLink_Nothing", "RequestId=5"],
    "unknown-parameter": ["HasBeenVerified", "Request=5"],
    "bad-number": ["HasBeenVerified", "RequestId=five"],
    "ambiguous-tail": ["Result", "RequestId=5"],
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_an_input_mistake_exits_2_in_one_line_and_sends_nothing(
    listening: tuple[socket.socket, str], mistake: str
) -> None:
    server, base_url = listening
    done = run_cli("call", *MISTAKES[mistake], base_url=base_url)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("verif-client: ")
    assert "Traceback" not in done.stderr
    assert _connections(server) == 0


@pytest.mark.parametrize(
    "name", ["HasBeenVerified", "hasbeenverified", "SecurityCode_HasBeenVerified"]
)
def test_a_short_operation_name_is_accepted(name: str) -> None:
    with serve_in_thread(Simulator(credentials=("u", "Short-Pa55-word"))) as server:
        done = run_cli(
            "call",
            name,
            "RequestId=4294967297",
            base_url=server.base_url,
            username="u",
            password="Short-Pa55-word",
        )
    assert done.returncode == 0, done.stderr
    assert '"verified"' in done.stdout
