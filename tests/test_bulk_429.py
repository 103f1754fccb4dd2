"""`bulk run` against a service that says "slow down": 429 with Retry-After, in a subprocess.

The service is the simulator behind a gate of the test's own that refuses
every third SMS with 429 and ``Retry-After: 1``; both log when each request
arrived, so the test sees what was sent, how often, and when.
"""

from __future__ import annotations

import itertools
import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proxysupport import ForwardProxy, proxy_in_thread, proxy_url, without_proxy_variables
from relsupport import PASSWORD, USER, read_body
from test_bulk_cli import SEND, Job, finish, texted

from verif_client.simulator import Script, Simulator, SimulatorConfig, serve_in_thread

PHONE = re.compile(rb"<PhoneNumber>(\d+)</PhoneNumber>")
WAIT = 1.0


class Refusing:
    """An ASGI app: every ``every``-th SMS request is answered 429 with Retry-After,
    the rest are the simulator's. ``log`` holds (monotonic time, phone, status)."""

    def __init__(self, simulator: Simulator, every: int = 3) -> None:
        self.simulator = simulator
        self.every = every
        self.sms = 0
        self.log: list[tuple[float, str, int]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.simulator(scope, receive, send)
            return
        body = await read_body(receive)
        phone = PHONE.search(body)
        if phone is not None:
            refused = self.refuses(phone[1].decode())
            self.log.append((time.monotonic(), phone[1].decode(), 429 if refused else 200))
            if refused:
                headers = [(b"retry-after", b"%g" % WAIT), (b"content-type", b"text/plain")]
                await send({"type": "http.response.start", "status": 429, "headers": headers})
                await send({"type": "http.response.body", "body": b"Too many requests"})
                return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.simulator(scope, replay, send)

    def refuses(self, phone: str) -> bool:
        """Whether this SMS request, to ``phone``, is answered 429."""
        self.sms += 1
        return self.sms % self.every == 0


class SlowDown(Refusing):
    """The first ``refusals`` SMS requests for each number in ``refused`` are
    answered 429 with ``Retry-After: 1``: more than the client's own retries
    (4 attempts), so the job has to send them again."""

    def __init__(self, simulator: Simulator, refused: set[str], refusals: int = 5) -> None:
        super().__init__(simulator)
        self.refused = refused
        self.refusals = refusals
        self.seen: Counter[str] = Counter()

    def refuses(self, phone: str) -> bool:
        self.seen[phone] += 1
        return phone in self.refused and self.seen[phone] <= self.refusals


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    without_proxy_variables(monkeypatch)


@pytest.fixture
def gate() -> Iterator[tuple[Refusing, str]]:
    config = SimulatorConfig(script=Script(pending_polls=0))
    gate = Refusing(Simulator(credentials=(USER, PASSWORD), config=config))
    with serve_in_thread(gate) as server:
        yield gate, server.base_url


PHONES = [f"51255501{n:02d}" for n in range(9)]


def test_a_job_meeting_429s_sends_every_row_once_at_the_services_pace(
    tmp_path: Path, gate: tuple[Refusing, str]
) -> None:
    refusing, base_url = gate
    job = Job(tmp_path, base_url, PHONES, "soap11")
    errors = finish(job.start("--concurrency", "1"), 0)
    # Every row once: each number texted exactly once, each row verified.
    assert texted(refusing.simulator) == Counter(PHONES)
    assert {row["status"] for row in job.outputs().values()} == {"verified"}
    assert len(job.outputs()) == len(PHONES)
    # Every third SMS refused; each refused number sent again, never before its Retry-After.
    refused = [(at, phone) for at, phone, status in refusing.log if status == 429]
    assert len(refused) == len(refusing.log) // 3 >= 3
    for at, phone in refused:
        again = [t for t, p, _ in refusing.log if p == phone and t > at]
        assert again
        assert again[0] - at >= WAIT
    # The operator sees why the job went slower than asked.
    assert "slowed to" in errors
    assert "429" in errors


def test_bulk_run_goes_through_the_proxy_from_the_environment(
    tmp_path: Path, gate: tuple[Refusing, str]
) -> None:
    refusing, base_url = gate
    refusing.every = 10**6  # no refusals here
    proxy = ForwardProxy()
    with proxy_in_thread(proxy) as port:
        job = Job(tmp_path, base_url.replace("127.0.0.1", "service.test"), PHONES[:3], "soap11")
        job.env["HTTP_PROXY"] = proxy_url(port)
        errors = finish(job.start(), 0)
    assert texted(refusing.simulator) == Counter(PHONES[:3])
    sends = [head for head in proxy.heads if SEND.encode() in head]
    assert len(sends) == 3
    assert all(head.startswith(b"POST http://service.test:") for head in sends)
    for text in (errors, job.output.read_text(), job.journal.read_bytes().decode("latin-1")):
        assert "Pr0xy" not in text


def test_a_row_refused_past_the_clients_retries_is_sent_again_after_retry_after(
    tmp_path: Path,
) -> None:
    config = SimulatorConfig(script=Script(pending_polls=0))
    gate = SlowDown(Simulator(credentials=(USER, PASSWORD), config=config), {PHONES[1]})
    with serve_in_thread(gate) as server:
        job = Job(tmp_path, server.base_url, PHONES[:3], "soap11")
        finish(job.start(), 0)
    assert texted(gate.simulator) == Counter(PHONES[:3])
    assert {row["status"] for row in job.outputs().values()} == {"verified"}
    attempts = [(at, status) for at, phone, status in gate.log if phone == PHONES[1]]
    assert [status for _, status in attempts] == [429] * 5 + [200]
    # The job's own resend waits out the last Retry-After too.
    gaps = [later - at for (at, _), (later, _) in itertools.pairwise(attempts)]
    assert min(gaps) >= WAIT, gaps
