"""A SyncVerificationClient never closed never holds the interpreter at exit.

A cron job that forgets ``close()`` (or whose own code raised first) must
end: the child process below makes a call (a pooled connection stays open),
then ends in each way a script does, and must exit with its own status.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from verif_client.simulator import Simulator, serve_in_thread

CHILD = textwrap.dedent(
    """
    import sys
    import verif_client as vc

    client = vc.SyncVerificationClient(sys.argv[1], username="user", password="pass")
    sent = client.send_confirmation_sms("5125550100", "Is this you?")
    print("sent", sent.request_id, flush=True)
    how = sys.argv[2]
    if how == "raise":
        raise RuntimeError("the caller's own code failed")
    if how == "poll-left-open":
        # Two ids nobody answers: the first outcome comes, the run stays open.
        policy = vc.PollPolicy(timeout=0.3)
        outcomes = client.poll_verifications([sent.request_id, 4294967297], policy=policy)
        print(next(outcomes).status, flush=True)
    if how == "exit-3":
        sys.exit(3)
    """
)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_in_thread(Simulator()) as server:
        yield server.base_url


@pytest.mark.parametrize(
    ("how", "status"), [("end", 0), ("raise", 1), ("exit-3", 3), ("poll-left-open", 0)]
)
def test_an_unclosed_client_lets_the_interpreter_exit(base_url: str, how: str, status: int) -> None:
    # A hang is a TimeoutExpired here: the test fails instead of waiting for ever.
    done = subprocess.run(
        [sys.executable, "-c", CHILD, base_url, how],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == status, done.stderr
    assert done.stdout.startswith("sent "), done.stderr
    if how == "raise":
        assert "the caller's own code failed" in done.stderr
