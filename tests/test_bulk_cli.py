"""`verif-client bulk run` against the everyday mistakes of an operator, in subprocesses.

Two processes on one journal, a kill, a Ctrl-C, answers that prove nothing,
bad input files and flags, a terminal of 80 columns, a hostile service. The
simulator (or a misbehaving peer of the test's own) serves on loopback from a
thread of the test process, so its request log is the truth of what was sent.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
import pytest
from relsupport import PASSWORD, USER, read_body

from verif_client.simulator import Script, Simulator, SimulatorConfig, serve_in_thread
from verif_client.simulator._server import ConnectionDropped

SEND = "SecureLink_Confirmation_SendRequestViaSms"


def wait_until(
    condition: Callable[[], bool], process: subprocess.Popen[bytes] | None = None
) -> None:
    """Bounded wait for an observable condition (or for the process to end)."""
    deadline = time.monotonic() + 60
    while not condition():
        assert process is None or process.poll() is None, "the run ended first"
        assert time.monotonic() < deadline, "the condition was never reached"
        time.sleep(0.002)


class Job:
    """One bulk job's files, and `verif-client bulk run` on them."""

    def __init__(self, directory: Path, base_url: str, phones: list[str], binding: str) -> None:
        self.dir = directory
        self.input = directory / "numbers.csv"
        self.journal = directory / "job.journal"
        self.output = directory / "out.jsonl"
        self.phones = phones
        self.input.write_text("phone_number,id\n" + "".join(f"{p},u{p}\n" for p in phones))
        self.env = {
            **os.environ,
            "VERIF_BASE_URL": base_url,
            "VERIF_API_USERNAME": USER,
            "VERIF_API_PASSWORD": PASSWORD,
            "VERIF_BINDING": binding,
        }
        self.runs = 0

    def command(self, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "verif_client._cli",
            "bulk",
            "run",
            "--input",
            str(self.input),
            "--journal",
            str(self.journal),
            "--output",
            str(self.output),
            "--question",
            "Is this you?",
            "--deadline",
            "30s",
            *extra,
        ]

    def start(self, *extra: str, **popen: Any) -> subprocess.Popen[bytes]:
        self.runs += 1
        popen.setdefault("stdout", subprocess.PIPE)
        popen.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen(self.command(*extra), env=self.env, **popen)

    def states(self) -> dict[int, tuple[str, int | None]]:
        if not self.journal.exists():
            return {}
        with sqlite3.connect(self.journal) as db:
            try:
                return {
                    line: (state, request_id)
                    for line, state, request_id in db.execute(
                        "SELECT line, state, request_id FROM rows"
                    )
                }
            except sqlite3.OperationalError:
                return {}  # not created yet

    def outputs(self) -> dict[str, dict[str, Any]]:
        rows = (json.loads(line) for line in self.output.read_text().splitlines())
        return {row["phone_number"]: row for row in rows}


def finish(process: subprocess.Popen[bytes], status: int) -> str:
    _, err = process.communicate(timeout=120)
    text = err.decode()
    assert process.returncode == status, text
    assert "Traceback" not in text
    return text


# -- the simulator ------------------------------------------------------------


@pytest.fixture
def simulator() -> Iterator[tuple[Simulator, str]]:
    # Latency keeps several requests in flight at once.
    config = SimulatorConfig(latency=0.05, script=Script(pending_polls=0))
    simulator = Simulator(credentials=(USER, PASSWORD), config=config)
    with serve_in_thread(simulator) as server:
        yield simulator, server.base_url


def texted(simulator: Simulator) -> Counter[str]:
    return Counter(str(call.params["PhoneNumber"]) for call in simulator.calls(SEND))


def test_two_processes_at_once_on_one_journal_text_each_number_at_most_once(
    tmp_path: Path, simulator: tuple[Simulator, str]
) -> None:
    sim, base_url = simulator
    job = Job(tmp_path, base_url, [f"512{n:07d}" for n in range(150)], "soap11")
    first, second = job.start("--concurrency", "4"), job.start("--concurrency", "4")
    errors = {process: finish(process, process.wait(timeout=120)) for process in (first, second)}
    # One owner: the other is refused in one line. (Should one process start so late
    # that the first has finished, it finds nothing left to send: also exit 0.)
    assert sorted(process.returncode for process in errors) in ([0, 3], [0, 0])
    for process, message in errors.items():
        if process.returncode == 3:
            assert message.count("\n") == 1, message
            assert f"{job.journal}: in use by" in message
    assert max(texted(sim).values()) == 1
    assert len(texted(sim)) == 150


def test_a_second_process_once_the_first_is_sending_is_refused_and_a_kill_is_taken_over(
    tmp_path: Path, simulator: tuple[Simulator, str]
) -> None:
    sim, base_url = simulator
    job = Job(tmp_path, base_url, [f"513{n:07d}" for n in range(80)], "soap11")
    owner = job.start("--concurrency", "4")
    wait_until(lambda: len(sim.calls(SEND)) >= 3, owner)
    late = job.start("--concurrency", "4")
    message = finish(late, 3)
    assert re.fullmatch(
        rf"verif-client: {re.escape(str(job.journal))}: in use by pid {owner.pid} on \S+ "
        r"since \S+; one process works a journal at a time\n",
        message,
    )
    # The owner dies with requests in flight; the next run takes the journal over.
    wait_until(lambda: len(sim.calls(SEND)) >= 20, owner)
    owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=30)
    in_flight = {line for line, (state, _) in job.states().items() if state == "sending"}
    finish(job.start("--concurrency", "4"), 4 if in_flight else 0)
    assert max(texted(sim).values()) == 1
    rows = job.outputs()
    assert len(rows) == 80
    assert {row["status"] for row in rows.values()} <= {"verified", "unknown"}
    assert {row["line"] for row in rows.values() if row["status"] == "unknown"} == in_flight


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_records_the_requests_in_flight_and_a_resume_finishes(
    tmp_path: Path, simulator: tuple[Simulator, str], signum: int
) -> None:
    sim, base_url = simulator
    sim.config = SimulatorConfig(latency=0.4, script=Script(pending_polls=0))
    job = Job(tmp_path, base_url, [f"514{n:07d}" for n in range(40)], "soap11")
    process = job.start("--concurrency", "6")
    in_flight: set[int] = set()

    def some_in_flight() -> bool:
        in_flight.update(line for line, (state, _) in job.states().items() if state == "sending")
        return len(in_flight) >= 3

    wait_until(some_in_flight, process)
    process.send_signal(signum)
    message = finish(process, 128 + signum)
    assert "resume with: verif-client bulk run" in message
    states = job.states()
    for line in in_flight:
        state, request_id = states[line]
        assert state not in ("sending", "unknown"), (line, state)
        assert request_id is not None
    assert any(state == "queued" for state, _ in states.values()), "stopped too late to prove it"
    finish(job.start("--concurrency", "6"), 0)
    assert max(texted(sim).values()) == 1
    assert {row["status"] for row in job.outputs().values()} == {"verified"}
    assert len(job.outputs()) == 40


def test_a_second_signal_stops_at_once_and_the_requests_in_flight_become_unknown(
    tmp_path: Path, simulator: tuple[Simulator, str]
) -> None:
    sim, base_url = simulator
    sim.config = SimulatorConfig(latency=30, script=Script(pending_polls=0))
    job = Job(tmp_path, base_url, [f"515{n:07d}" for n in range(10)], "soap11")
    process = job.start("--concurrency", "3", "--grace", "60s")
    wait_until(lambda: sum(s == "sending" for s, _ in job.states().values()) == 3, process)
    process.send_signal(signal.SIGINT)
    assert process.stderr is not None
    while b"stopping:" not in process.stderr.readline():
        assert process.poll() is None
    process.send_signal(signal.SIGINT)
    finish(process, 130)
    states = job.states()
    assert sorted(state for state, _ in states.values()) == ["queued"] * 7 + ["unknown"] * 3
    rows = job.outputs()
    assert all("stopped while the SMS request was in flight" in r["reason"] for r in rows.values())


# -- a peer whose answers prove nothing ----------------------------------------


class Peer:
    """Answers SendRequestViaSms (HTTP POST binding) by the number's last two digits."""

    def __init__(self) -> None:
        self.received: Counter[str] = Counter()
        self.answered = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        phone = parse_qs(body.decode()).get("PhoneNumber", ["?"])[0]
        self.received[phone] += 1
        kind = phone[-2:]
        if kind == "05" or kind == "09":  # never answers in time (or for 10 s)
            await anyio.sleep(10)
        if kind == "06":
            raise ConnectionDropped()
        status, content, headers = {
            "01": (200, b'<?xml version="1.0"?><long xmlns="urn:x">12', []),
            "02": (502, b"Bad Gateway", []),
            "03": (504, b"Gateway Timeout", []),
            "04": (200, b"", [(b"content-length", str(2 * 1024 * 1024).encode())]),
            "07": (400, b"System.ArgumentException: PhoneNumber refused.", []),
            "08": (500, b"\x1b]0;pwned\x07\x1b[2J\x1b[1;1Hverified 200\x9b31m", []),
        }.get(kind, (502, b"Bad Gateway", []))
        self.answered += 1
        headers = headers or [(b"content-length", str(len(content)).encode())]
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"text/plain"), *headers],
            }
        )
        await send({"type": "http.response.body", "body": content})


@pytest.fixture
def peer() -> Iterator[tuple[Peer, str]]:
    app = Peer()
    with serve_in_thread(app) as server:
        yield app, server.base_url


def test_answers_that_prove_nothing_leave_rows_unknown_and_a_rerun_sends_nothing(
    tmp_path: Path, peer: tuple[Peer, str]
) -> None:
    app, base_url = peer
    phones = {
        "5125550101": "unknown",  # malformed 200
        "5125550102": "unknown",  # 502
        "5125550103": "unknown",  # 504
        "5125550104": "unknown",  # too large
        "5125550105": "unknown",  # no answer within --timeout, after the write
        "5125550106": "unknown",  # connection dropped after the write
        "5125550107": "failed",  # a refusal the service wrote out
    }
    job = Job(tmp_path, base_url, list(phones), "http-post")
    finish(job.start("--timeout", "1"), 4)
    rows = job.outputs()
    assert {phone: row["status"] for phone, row in rows.items()} == phones
    for row in rows.values():
        assert row["reason"], row
    assert "refused" in rows["5125550107"]["reason"]
    assert set(app.received.values()) == {1}
    finish(job.start("--timeout", "1"), 4)
    assert set(app.received.values()) == {1}, "a rerun sent a row again"
    assert sum(app.received.values()) == len(phones)


def test_escape_sequences_from_the_service_never_reach_the_terminal(
    tmp_path: Path, peer: tuple[Peer, str]
) -> None:
    _, base_url = peer
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "verif_client._cli",
            "call",
            SEND,
            "PhoneNumber=5125550108",
            "ConfirmationQuestion=Pay?",
            "--binding",
            "http-post",
            "--base-url",
            base_url,
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert process.returncode == 1
    assert b"\x1b" not in process.stderr
    assert b"\x07" not in process.stderr
    assert "\x9b" not in process.stderr.decode()
    assert process.stderr.decode().count("\n") == 1
    assert "\\x1b]0;pwned\\x07" in process.stderr.decode()


def test_progress_is_drawn_before_any_row_settles_and_fits_80_columns(
    tmp_path: Path, peer: tuple[Peer, str]
) -> None:
    app, base_url = peer
    # Answers take 10 s: nothing settles while the test watches.
    job = Job(tmp_path, base_url, [f"51255{n:03d}09" for n in range(30)], "http-post")
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    process = job.start("--concurrency", "5", stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    screen = b""
    try:
        # Two draws with rows in flight: drawn, and redrawn by the timer.
        while screen.count(b"sending 5") < 2:
            ready, _, _ = select.select([controller], [], [], 60)
            assert ready, "nothing drawn"
            screen += os.read(controller, 65536)
        assert app.answered == 0, "a row settled before the test looked"
    finally:
        process.kill()
        process.wait(timeout=30)
        os.close(controller)
    text = screen.decode()
    assert "0/30 done" in text
    assert "queued 25" in text
    for line in re.split(r"[\r\n]+", text.replace("\x1b[K", "")):
        assert len(line) <= 80, line
        assert "\x1b" not in line, line


# -- mistakes that leave nothing behind -------------------------------------------


def cli(
    *argv: str, env: dict[str, str] | None = None, cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verif_client._cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        check=False,
    )


BAD_INPUTS = {
    "no-question.csv": (b"phone_number\n5125550100\n", "no question"),
    "no-phone.csv": (b"number,question\n5125550100,Pay?\n", "no phone_number column"),
    "semicolons.csv": (b"phone_number;question\n5125550100;Pay?\n", "comma-separated"),
    "empty.csv": (b"", "empty"),
    "header-only.csv": (b"phone_number,question\n", "no rows"),
    "excel.csv": ("phone_number,question\n5125550100,Caf\u00e9?\n".encode("cp1252"), "--encoding"),
    "bad-byte.csv": (b"phone_number,question\n5125550100,Pay\xff?\n", "line 2, byte 15"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_a_bad_input_exits_2_in_one_line_and_leaves_no_journal(tmp_path: Path, name: str) -> None:
    data, problem = BAD_INPUTS[name]
    (tmp_path / name).write_bytes(data)
    args = ["bulk", "run", "--input", name, "--journal", "job.sqlite", "--output", "out.jsonl"]
    args += ["--base-url", "http://127.0.0.1:9", "--binding", "http-post"]
    if name != "no-question.csv":
        args += ["--question", "Pay?"] if b"question" not in data else []
    done = cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert problem in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == [name]


def test_a_forced_encoding_runs_the_rows_that_decode(
    tmp_path: Path, simulator: tuple[Simulator, str]
) -> None:
    sim, base_url = simulator
    job = Job(tmp_path, base_url, [], "soap11")
    job.input.write_bytes(b"phone_number,question\n5125550100,Caf\xe9?\n5125550101,Bad\x81?\n")
    finish(job.start("--encoding", "cp1252"), 0)
    rows = job.outputs()
    assert rows["5125550100"]["status"] == "verified"
    assert rows["5125550101"]["status"] == "invalid"
    assert "0x81" in rows["5125550101"]["reason"]
    assert [call.params["ConfirmationQuestion"] for call in sim.calls(SEND)] == ["Caf\u00e9?"]
    # The journal is bound to the input as read: another encoding is another input.
    message = finish(job.start("--encoding", "latin-1"), 3)
    assert message.count("\n") == 1
    assert "different input" in message


def test_a_job_is_bound_to_its_question(tmp_path: Path, simulator: tuple[Simulator, str]) -> None:
    sim, base_url = simulator
    job = Job(tmp_path, base_url, ["5125550100", "5125550101"], "soap11")
    finish(job.start(), 0)
    # The same input asking something else is another job: refused in one line.
    message = finish(job.start("--question", "Did you ask to pay $2,500?"), 3)
    assert message.count("\n") == 1
    assert "another --question" in message
    # The job's own question joins it (finished: nothing is sent again).
    finish(job.start(), 0)
    asked = {call.params["ConfirmationQuestion"] for call in sim.calls(SEND)}
    assert asked == {"Is this you?"}
    assert len(sim.calls(SEND)) == 2


MISTAKES = [
    # (argv, environment, exit status, words the one line must hold)
    (["bulk", "run", "--journal", "new.sqlite", "--output", "o.jsonl"], {}, 2, "needs --input"),
    (
        ["bulk", "run", "--input", "in.csv", "--journal", "j.sqlite", "--output", "no/o.jsonl"],
        {},
        2,
        "no such directory",
    ),
    (
        ["bulk", "run", "--input", "missing.csv", "--journal", "j.sqlite", "--output", "o.jsonl"],
        {},
        2,
        "missing.csv",
    ),
    (
        ["bulk", "run", "--input", "in.csv", "--journal", "j.sqlite", "--output", "o.jsonl"],
        {"VERIF_BINDING": "bogus"},
        2,
        "VERIF_BINDING: 'bogus' is not a binding",
    ),
    (
        ["bulk", "run", "--input", "in.csv", "--journal", "j.sqlite", "--output", "o.jsonl"],
        {"VERIF_TIMEOUT": "-3"},
        2,
        "VERIF_TIMEOUT",
    ),
    (
        [
            *("bulk", "run", "--input", "in.csv", "--encoding", "nope", "--journal", "j.sqlite"),
            *("--output", "o.jsonl"),
        ],
        {},
        2,
        "no such encoding",
    ),
    (["simulate", "--port", "99999"], {}, 2, "a port from 0 to 65535"),
    (["simulate", "--latency", "-1"], {}, 2, "seconds >= 0"),
    (["bulk", "status", "--journal", "nothing.sqlite"], {}, 3, "no such journal"),
    (
        [
            "bulk",
            "run",
            "--input",
            "in.csv",
            "--journal",
            "postgresql://db/v?job=a",
            "--output",
            "o",
        ],
        {},
        3,
        "multi-machine jobs run on Temporal",
    ),
    (["bulk", "status", "--journal", "postgres://db/v?job=a"], {}, 3, "run on Temporal"),
    (["bulk", "status", "--journal", "corrupt.sqlite"], {}, 3, "not a usable journal"),
    (["bulk", "export", "--journal", "corrupt.sqlite", "--output", "x"], {}, 3, "not a usable"),
    (
        ["bulk", "run", "--input", "in.csv", "--journal", "corrupt.sqlite", "--output", "o"],
        {},
        3,
        "not a usable journal",
    ),
]


@pytest.mark.parametrize(("argv", "env", "status", "words"), MISTAKES)
def test_mistakes_are_one_or_two_lines_without_a_traceback(
    tmp_path: Path, argv: list[str], env: dict[str, str], status: int, words: str
) -> None:
    (tmp_path / "in.csv").write_text("phone_number\n5125550100\n")
    (tmp_path / "corrupt.sqlite").write_bytes(b"this is not a database" * 100)
    before = sorted(path.name for path in tmp_path.iterdir())
    env = {"VERIF_BASE_URL": "http://127.0.0.1:9", "VERIF_BINDING": "http-post", **env}
    if argv[:2] == ["bulk", "run"]:
        argv = [*argv, "--question", "Pay?"]
    done = cli(*argv, env=env, cwd=tmp_path)
    assert done.returncode == status, done.stderr
    assert words in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == before


def test_version_and_help_name_the_environment_variables(tmp_path: Path) -> None:
    version = cli("--version", cwd=tmp_path)
    assert version.returncode == 0
    assert re.fullmatch(r"verif-client \d+\.\d+\S*\n", version.stdout)
    helptext = cli("bulk", "run", "--help", cwd=tmp_path).stdout
    for words in ("VERIF_BASE_URL", "VERIF_BINDING", "VERIF_TIMEOUT", "VERIF_RATE", "default 50"):
        assert words in re.sub(r"\s+", " ", helptext)


def test_verbose_turns_on_the_librarys_debug_log(
    tmp_path: Path, simulator: tuple[Simulator, str]
) -> None:
    _, base_url = simulator
    argv = ["call", "GetMobileConsentText", "--base-url", base_url, "--binding", "http-get"]
    quiet = cli(*argv, cwd=tmp_path)
    loud, last = cli("-v", *argv, cwd=tmp_path), cli(*argv, "--verbose", cwd=tmp_path)
    assert quiet.returncode == loud.returncode == last.returncode == 0
    assert quiet.stderr == ""
    for run in (loud, last):
        assert "DEBUG verif_client" in run.stderr
        assert "GetMobileConsentText" in run.stderr


def test_a_port_in_use_is_one_line(tmp_path: Path, simulator: tuple[Simulator, str]) -> None:
    _, base_url = simulator
    port = base_url.rsplit(":", 1)[1]
    done = cli("simulate", "--port", port, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == f"verif-client: simulate: 127.0.0.1:{port}: Address already in use\n"
