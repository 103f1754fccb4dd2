"""The bulk job's sending loop as a user of ``verif_client.bulk`` meets it:
a stop asked for while SMSes are in flight (once, twice, after the grace, once
only polls are left), a service that says "slow down" (429), one nobody can
reach, a send the client's binding refuses, and rows resumed long after their
send. In-process against the simulator, on asyncio and trio, so that mutation
testing sees ``bulk/_runner.py`` (the CLI's tests of the same run in
subprocesses)."""

from __future__ import annotations

import json
import locale
import re
import socket
import sqlite3
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import attrs
import httpx
import pytest
from relsupport import ASGIApp, read_body, request_id_rewritten

import verif_client as vc
from verif_client import bulk
from verif_client.bulk._runner import IN_FLIGHT_STOP_REASON
from verif_client.simulator import Script, Simulator, SimulatorConfig
from verif_client.simulator._server import Server, _Connection

pytestmark = pytest.mark.anyio

FAST = vc.PollPolicy(initial_delay=0.01, max_delay=0.05, false_means="final")
FIRST_ID = 4294967297
SEND = "SecureLink_Confirmation_SendRequestViaSms"
POLL = "SecureLink_SecurityCode_HasBeenVerified"
NUMBERS = ["5550001111", "5550002222", "5550003333", "5550004444"]
DATA = b"phone_number\n" + b"".join(f"{number}\n".encode() for number in NUMBERS)
PHONE = re.compile(rb"<PhoneNumber>(\d+)</PhoneNumber>")
RERUN = (
    "; the job stopped at once and its rows stay queued: correct the settings and run the same"
    " command again"
)


def options(**changes: Any) -> bulk.BulkOptions:
    return bulk.BulkOptions(
        **{"question": "Pay?", "concurrency": 1, "deadline": 5, "policy": FAST, **changes}
    )


def simulator(**script: Any) -> Simulator:
    return Simulator(config=SimulatorConfig(script=Script(**{"pending_polls": 1, **script})))


class SmsesHeldTogether:
    """A ``watched`` hook: each SMS waits until ``count`` are in flight at once,
    and ``then`` runs as the last one arrives, before any is let go."""

    def __init__(self, count: int, then: Callable[[], object] = lambda: None) -> None:
        self.count = count
        self.then = then
        self.arrived = 0
        self._all_in = anyio.Event()

    async def __call__(self, operation: str, _number: int, _send: Any) -> bool:
        if operation == SEND:
            self.arrived += 1
            if self.arrived == self.count:
                self.then()
                self._all_in.set()
            await self._all_in.wait()
        return False


def first_sms_unanswered(stopper: bulk.Stopper, *, stops: int) -> Hook:
    """A ``watched`` hook: the first row's SMS asks for ``stops`` stops, then the
    service never answers it."""

    async def hook(operation: str, number: int, _send: Any) -> bool:
        if operation == SEND and number == int(NUMBERS[0]):
            for _ in range(stops):
                stopper.request()
            await anyio.Event().wait()  # the service never answers
        return False

    return hook


def client(app: ASGIApp, binding: vc.Binding = vc.Binding.SOAP11) -> vc.VerificationClient:
    return vc.VerificationClient(
        "http://simulator",
        username="user",
        password="pass",
        transport=httpx.ASGITransport(app=app),
        binding=binding,
        retry=vc.NO_RETRY,
    )


Hook = Callable[[str, int, Any], Awaitable[bool]]


def watched(sim: Simulator, hook: Hook) -> ASGIApp:
    """The simulator behind ``hook(operation, phone number or request id, send)``,
    called for every call before the simulator sees it: it may act (ask for a
    stop), hold the call, or answer it itself (returns True) instead."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await sim(scope, receive, send)
        body = await read_body(receive)
        phone = PHONE.search(body)
        if phone is not None and SEND.encode() in body:
            answered = await hook(SEND, int(phone[1]), send)
        else:
            answered = await hook(POLL if POLL.encode() in body else "other", 0, send)
        if answered:
            return None

        async def again() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        return await sim(scope, again, send)

    return app


def read_rows(path: Path) -> dict[int, dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    by_line = {row["line"]: row for row in rows}
    assert len(by_line) == len(rows), "a row written twice"
    return by_line


def counted(counts: dict[str, int]) -> dict[str, int]:
    return {str(state): count for state, count in counts.items() if count}


async def journal_counts(journal: str) -> dict[str, int]:
    """What ``bulk status`` counts, from the journal alone."""
    job = await bulk.open_job(journal, create=False)
    try:
        return await job.counts()
    finally:
        await job.aclose()


@pytest.fixture
def where(tmp_path: Path) -> dict[str, str]:
    return {"journal": str(tmp_path / "job.sqlite"), "output": str(tmp_path / "out.jsonl")}


def test_a_stopper_tells_its_listeners_how_many_requests_came_until_they_stop_listening() -> None:
    stopper = bulk.Stopper()
    # docs/bulk.md: requests in flight get up to 10 s by default.
    assert (stopper.grace, stopper.requests, stopper.reason) == (10.0, 0, None)
    first: list[int] = []
    second: list[int] = []
    stop_first = stopper.listen(first.append)
    stopper.listen(second.append)
    stopper.request()
    stop_first()
    stopper.request("SIGTERM")
    assert (first, second, stopper.requests) == ([1], [1, 2], 2)
    # The reason is the first request's.
    assert stopper.reason == "stop requested"
    named = bulk.Stopper()
    named.request("SIGTERM")
    named.request("SIGINT")
    assert named.reason == "SIGTERM"


async def test_a_stop_lets_the_sms_in_flight_be_recorded_and_leaves_the_rest_queued(
    where: dict[str, str],
) -> None:
    sim = simulator()
    stopper = bulk.Stopper()
    seen: list[bulk.Progress] = []

    async def stop_at_the_first_sms(operation: str, _number: int, _send: Any) -> bool:
        if operation == SEND and stopper.requests == 0:
            stopper.request()  # as Ctrl-C does, while this SMS is on its way
        return False

    async with client(watched(sim, stop_at_the_first_sms)) as c:
        counts = await bulk.run_job(
            c, **where, data=DATA, options=options(), stopper=stopper, on_progress=seen.append
        )
    # Its SMS went: recorded with its request id, left for the next run to poll.
    assert counted(counts) == {"sent": 1, "queued": 3}
    assert seen[-1].stopping
    assert len(sim.calls(SEND)) == 1
    assert sim.calls(POLL) == []

    async with client(sim) as c:
        counts = await bulk.run_job(c, **where, options=options())
    assert counted(counts) == {"verified": 4}
    assert len(sim.calls(SEND)) == 4
    assert read_rows(Path(where["output"]))[2]["request_id"] == FIRST_ID


async def test_a_stop_leaves_the_sends_still_waiting_for_a_connection_unsent(
    where: dict[str, str],
) -> None:
    sim = simulator()
    stopper = bulk.Stopper()
    # Two SMSes in flight at once; the other two rows wait for a slot of
    # the client's two connections.
    stop_once_two_are_in = SmsesHeldTogether(2, then=stopper.request)
    app = watched(sim, stop_once_two_are_in)
    async with vc.VerificationClient(
        "http://simulator",
        username="user",
        password="pass",
        transport=httpx.ASGITransport(app=app),
        binding=vc.Binding.SOAP11,
        retry=vc.NO_RETRY,
        max_connections=2,
    ) as c:
        counts = await bulk.run_job(
            c, **where, data=DATA, options=options(concurrency=4), stopper=stopper
        )
    assert counted(counts) == {"sent": 2, "queued": 2}
    assert stop_once_two_are_in.arrived == 2


async def test_a_second_stop_ends_the_run_at_once_and_the_sms_in_flight_is_unknown(
    where: dict[str, str],
) -> None:
    # A grace far longer than the test may take: only the second request ends the run.
    stopper = bulk.Stopper(grace=3600)

    never_answer_the_first_sms = first_sms_unanswered(stopper, stops=2)
    sim = simulator()
    async with client(watched(sim, never_answer_the_first_sms)) as c:
        counts = await bulk.run_job(c, **where, data=DATA, options=options(), stopper=stopper)
    assert counted(counts) == {"unknown": 1, "queued": 3}
    assert read_rows(Path(where["output"])) == {
        2: {
            **{"line": 2, "id": None, "phone_number": NUMBERS[0], "status": "unknown"},
            **{"request_id": None, "reason": IN_FLIGHT_STOP_REASON},
        }
    }


async def test_an_sms_still_in_flight_when_the_grace_ends_is_unknown(
    where: dict[str, str],
) -> None:
    stopper = bulk.Stopper(grace=0)

    never_answer_the_first_sms = first_sms_unanswered(stopper, stops=1)
    async with client(watched(simulator(), never_answer_the_first_sms)) as c:
        counts = await bulk.run_job(c, **where, data=DATA, options=options(), stopper=stopper)
    assert counted(counts) == {"unknown": 1, "queued": 3}
    assert read_rows(Path(where["output"]))[2]["reason"] == IN_FLIGHT_STOP_REASON


async def test_a_stop_once_every_sms_has_gone_ends_the_run_without_waiting_for_answers(
    where: dict[str, str],
) -> None:
    stopper = bulk.Stopper(grace=3600)
    polls = 0

    async def stop_at_the_second_poll(operation: str, _number: int, _send: Any) -> bool:
        # The row's SMS was answered before its first poll: nothing is left to send.
        nonlocal polls
        if operation == POLL:
            polls += 1
            if polls == 2:
                stopper.request()
        return False

    sim = simulator(answer="never")
    data = b"phone_number\n5550001111\n"
    async with client(watched(sim, stop_at_the_second_poll)) as c:
        counts = await bulk.run_job(c, **where, data=data, options=options(), stopper=stopper)
    assert counted(counts) == {"sent": 1}
    assert polls == 2


async def test_a_stop_asked_before_the_run_sends_nothing(where: dict[str, str]) -> None:
    stopper = bulk.Stopper()
    stopper.request()
    sim = simulator()
    async with client(sim) as c:
        counts = await bulk.run_job(c, **where, data=DATA, options=options(), stopper=stopper)
    assert counted(counts) == {"queued": 4}
    assert sim.calls(SEND) == []


async def test_an_sms_refused_with_429_is_sent_again_and_its_row_verified(
    where: dict[str, str],
) -> None:
    sim = simulator()
    refused: list[int] = []

    async def refuse_the_first_sms(operation: str, number: int, send: Any) -> bool:
        if operation != SEND or refused:
            return False
        refused.append(number)
        headers = [(b"retry-after", b"0"), (b"content-type", b"text/plain")]
        await send({"type": "http.response.start", "status": 429, "headers": headers})
        await send({"type": "http.response.body", "body": b"Too many requests"})
        return True

    seen: list[float | None] = []
    async with client(watched(sim, refuse_the_first_sms)) as c:
        counts = await bulk.run_job(
            c,
            **where,
            data=DATA,
            options=options(),
            on_progress=lambda progress: seen.append(progress.slowed_to),
        )
    assert refused == [int(NUMBERS[0])]
    assert counted(counts) == {"verified": 4}
    assert [link.phone_number for link in sim.secure_links] == NUMBERS
    # The client slowed down for the 429; the progress shows it.
    assert seen[0] is None
    assert any(rate is not None for rate in seen)


async def test_a_row_refused_with_429_as_the_job_stops_is_queued_for_the_next_run(
    where: dict[str, str],
) -> None:
    # A 429 is refused, not processed: the row is not failed (a plain rerun
    # would leave it unsent), it waits in the queue as the rows not yet sent do.
    stopper = bulk.Stopper()

    async def stop_and_refuse(operation: str, _number: int, send: Any) -> bool:
        if operation != SEND:
            return False
        stopper.request()
        headers = [(b"retry-after", b"0"), (b"content-type", b"text/plain")]
        await send({"type": "http.response.start", "status": 429, "headers": headers})
        await send({"type": "http.response.body", "body": b"Too many requests"})
        return True

    sim = simulator()
    seen: list[Counter[str]] = []
    async with client(watched(sim, stop_and_refuse)) as c:
        counts = await bulk.run_job(
            c,
            **where,
            data=DATA,
            options=options(),
            stopper=stopper,
            on_progress=lambda progress: seen.append(Counter(progress.states)),
        )
    assert counted(counts) == {"queued": 4}
    assert +seen[-1] == Counter({"queued": 4})
    assert sim.secure_links == []
    assert (await anyio.Path(where["output"]).read_text()) == ""
    async with client(sim) as c:
        counts = await bulk.run_job(c, **where, options=options())
    assert counted(counts) == {"verified": 4}
    assert [link.phone_number for link in sim.secure_links] == NUMBERS


async def test_a_service_nobody_can_reach_stops_the_job_with_its_rows_queued(
    where: dict[str, str],
) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # closed again: connections are refused
    async with vc.VerificationClient(
        f"http://127.0.0.1:{port}", username="user", password="pass", retry=vc.NO_RETRY
    ) as c:
        with pytest.raises(bulk.JobStoppedError) as stopped:
            await bulk.run_job(c, **where, data=DATA, options=options(concurrency=3))
    assert re.fullmatch(
        r"the service could not be reached before any SMS was sent "
        rf"\(TransportError: {SEND}: .+\){re.escape(RERUN)}",
        str(stopped.value),
    ), str(stopped.value)
    assert counted(await journal_counts(where["journal"])) == {"queued": 4}


async def test_refused_credentials_stop_every_sms_in_flight_with_its_row_queued(
    where: dict[str, str],
) -> None:
    sim = Simulator(
        credentials=("user", "other"), config=SimulatorConfig(script=Script(pending_polls=1))
    )
    hold_until_three_are_in = SmsesHeldTogether(3)
    seen: list[Counter[str]] = []
    async with client(watched(sim, hold_until_three_are_in)) as c:
        with pytest.raises(bulk.JobStoppedError) as stopped:
            await bulk.run_job(
                c,
                **where,
                data=DATA,
                options=options(concurrency=3),
                on_progress=lambda progress: seen.append(Counter(progress.states)),
            )
    assert re.fullmatch(
        r"the service refused the credentials \(AuthenticationError: .+\)" + re.escape(RERUN),
        str(stopped.value),
    ), str(stopped.value)
    # The three in flight met the same refusal: all queued again, none unknown.
    assert hold_until_three_are_in.arrived == 3
    assert counted(await journal_counts(where["journal"])) == {"queued": 4}
    assert +seen[-1] == Counter({"queued": 4})


async def test_a_send_the_clients_binding_refuses_makes_its_row_invalid(
    where: dict[str, str],
) -> None:
    # Loaded (and checked) by a SOAP client, resumed by an HTTP GET one, where
    # ASP.NET refuses markup in a question: refused before anything left.
    data = b"phone_number,question\n5550001111,Pay <ACME>?\n5550002222,Pay?\n"
    stopper = bulk.Stopper()
    stopper.request()
    sim = simulator()
    async with client(sim) as soap:
        await bulk.run_job(soap, **where, data=data, options=options(), stopper=stopper)
    seen: list[Counter[str]] = []
    async with client(sim, vc.Binding.HTTP_GET) as get:
        counts = await bulk.run_job(
            get, **where, options=options(), on_progress=lambda p: seen.append(Counter(p.states))
        )
    assert counted(counts) == {"invalid": 1, "verified": 1}
    row = read_rows(Path(where["output"]))[2]
    assert row["status"] == "invalid"
    assert row["request_id"] is None
    assert "Question" in row["reason"]
    assert [link.phone_number for link in sim.secure_links] == ["5550002222"]
    assert seen[-1] == Counter({"invalid": 1, "verified": 1, "queued": 0, "sending": 0, "sent": 0})


async def sent_earlier(journal: str, data: bytes, ids: list[int], *, ago: float = 0) -> None:
    """A journal as a run that died left it: its rows sent with ``ids``, ``ago`` seconds ago."""
    job = bulk.open_journal(journal)
    try:
        job.load(bulk.read_input(data, "Pay?"), "by-the-test")
        for line, request_id in enumerate(ids, start=2):
            job.mark_sending(line)
            job.mark_sent(line, request_id)
    finally:
        job.close()
    with sqlite3.connect(journal) as db:
        db.execute("UPDATE rows SET sent_at = sent_at - ?", (ago,))


async def test_a_journal_holding_an_id_twice_polls_only_the_first_row_that_holds_it(
    where: dict[str, str],
) -> None:
    sim = simulator()
    async with client(sim) as c:
        texted = await c.send_confirmation_sms(NUMBERS[0], "Pay?")
        # As an earlier version could leave it: three rows sent under one id.
        await sent_earlier(
            where["journal"], DATA[: DATA.index(b"5550004444")], [texted.request_id] * 3
        )
        counts = await bulk.run_job(c, **where, options=options())
    assert counted(counts) == {"verified": 1, "unknown": 2}
    rows = read_rows(Path(where["output"]))
    assert rows[2]["status"] == "verified"
    for line in (3, 4):
        assert rows[line]["status"] == "unknown"
        assert rows[line]["request_id"] == texted.request_id
        assert rows[line]["reason"] == (
            f"the service answered with request id {texted.request_id}, which it had already "
            "given line 2: this row's answer cannot be told apart, so it is not polled"
        )


async def test_a_row_resumed_after_its_deadline_is_polled_once_and_not_waited_for(
    where: dict[str, str],
) -> None:
    sim = simulator(pending_polls=3)
    async with client(sim) as c:
        texted = await c.send_confirmation_sms(NUMBERS[0], "Pay?")
        # Sent an hour ago by a run that died; the job's deadline is 5 s.
        await sent_earlier(
            where["journal"], DATA[: DATA.index(b"5550002222")], [texted.request_id], ago=3600
        )
        counts = await bulk.run_job(c, **where, options=options())
    assert counted(counts) == {"not_verified": 1}
    assert read_rows(Path(where["output"]))[2]["polls"] == 1


async def test_the_progress_counts_every_row_once_at_every_step(where: dict[str, str]) -> None:
    seen: list[Counter[str]] = []
    sent_at: list[float | None] = []

    def on_progress(progress: bulk.Progress) -> None:
        seen.append(Counter(progress.states))
        sent_at.append(progress.last_sent)
        assert progress.deadline == 5

    data = DATA + b"555-3\n"
    before = time.monotonic()
    async with client(simulator()) as c:
        counts = await bulk.run_job(
            c, **where, data=data, options=options(concurrency=2), on_progress=on_progress
        )
    assert counted(counts) == {"verified": 4, "invalid": 1}
    # When the last SMS went (the ETA's bound): none before the first.
    assert sent_at[0] is None
    assert sent_at[-1] is not None
    assert before <= sent_at[-1] <= time.monotonic()
    assert seen[0] == Counter({"queued": 4, "invalid": 1})
    assert +seen[-1] == Counter({"verified": 4, "invalid": 1})
    for states_now in seen:
        assert min(states_now.values()) >= 0, states_now
        assert sum(states_now.values()) == 5, states_now


@pytest.fixture
def ascii_locale() -> Iterator[None]:
    """The process's locale as a user's whose terminal is not UTF-8 (only "C"
    exists here besides C.UTF-8: ASCII)."""
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


@pytest.mark.usefixtures("ascii_locale")
async def test_the_output_is_utf8_as_written_and_as_rebuilt_whatever_the_locale(
    where: dict[str, str],
) -> None:
    data = "id,phone_number\nZoë ☎,5550001111\n".encode()
    output = anyio.Path(where["output"])
    async with client(simulator()) as c:
        await bulk.run_job(c, **where, data=data, options=options())
        # As written when the row finished, and as a rerun rebuilds it from the journal.
        for _ in range(2):
            text = (await output.read_bytes()).decode("utf-8")
            assert '"id": "Zoë ☎"' in text
            assert json.loads(text)["id"] == "Zoë ☎"
            await bulk.run_job(c, **where, options=options())


async def test_an_sms_the_service_answers_with_request_id_0_fails_its_row(
    where: dict[str, str],
) -> None:
    # The service took the first number's call but gave no request id, and no message.
    id_0_for_the_first_number = request_id_rewritten(simulator(), f">{NUMBERS[0]}<".encode(), 0)
    async with client(id_0_for_the_first_number) as c:
        counts = await bulk.run_job(c, **where, data=DATA, options=options())
    assert counted(counts) == {"failed": 1, "verified": 3}
    assert read_rows(Path(where["output"]))[2] == {
        **{"line": 2, "id": None, "phone_number": NUMBERS[0], "status": "failed"},
        **{"request_id": None, "reason": "request id 0"},
    }


async def test_a_row_sent_under_the_id_of_a_finished_row_is_not_polled(
    where: dict[str, str],
) -> None:
    sim = simulator()
    async with client(sim) as c:
        texted = await c.send_confirmation_sms(NUMBERS[0], "Pay?")
        data = DATA[: DATA.index(b"5550003333")]
        await sent_earlier(where["journal"], data, [texted.request_id] * 2)
        job = bulk.open_journal(where["journal"])
        try:
            # Line 2 had its answer; line 3 was recorded under the same id.
            job.finish(2, bulk.RowState.VERIFIED, {"verified": True}, expected=bulk.RowState.SENT)
        finally:
            job.close()
        counts = await bulk.run_job(c, **where, options=options())
    assert counted(counts) == {"verified": 1, "unknown": 1}
    assert read_rows(Path(where["output"]))[3]["reason"] == (
        f"the service answered with request id {texted.request_id}, which it had already given "
        "line 2: this row's answer cannot be told apart, so it is not polled"
    )
    assert len(sim.calls(POLL)) == 0


async def test_the_concurrency_caps_the_polls_in_flight_too(where: dict[str, str]) -> None:
    sim = simulator()
    in_flight = 0
    most = 0

    async def count_polls(operation: str, _number: int, _send: Any) -> bool:
        nonlocal in_flight, most
        if operation == POLL:
            in_flight += 1
            most = max(most, in_flight)
            for _ in range(5):
                await anyio.lowlevel.checkpoint()  # other polls may start meanwhile
            in_flight -= 1
        return False

    async with client(sim) as c:
        ids = [(await c.send_confirmation_sms(number, "Pay?")).request_id for number in NUMBERS]
        await sent_earlier(where["journal"], DATA, ids)
    async with client(watched(sim, count_polls)) as c:
        # No jitter: the four first polls are due at once.
        at_once = attrs.evolve(FAST, jitter=0)
        counts = await bulk.run_job(c, **where, options=options(concurrency=2, policy=at_once))
    assert counted(counts) == {"verified": 4}
    assert 1 <= most <= 2


async def test_a_service_gone_after_an_sms_fails_each_row_it_meets_and_the_job_goes_on(
    where: dict[str, str],
) -> None:
    # Once an SMS went, a service nobody can reach is no longer a wrong address:
    # the rows that meet it fail (their requests never left), the job does not stop.
    sim = simulator()
    (tcp,) = (await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)).listeners
    port = tcp.extra(anyio.abc.SocketAttribute.local_port)
    server = Server("127.0.0.1", port)

    async def answer_once_then_go(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await tcp.aclose()  # nobody listens any more; this connection closes after the answer

        async def closing(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message["headers"], (b"connection", b"close")]}
            await send(message)

        await sim(scope, receive, closing)

    async def accept(tg: anyio.abc.TaskGroup) -> None:
        while True:
            try:
                stream = await tcp.accept()
            except anyio.ClosedResourceError:
                return
            tg.start_soon(_Connection(answer_once_then_go, stream, server).run)

    async with anyio.create_task_group() as tg:
        tg.start_soon(accept, tg)
        async with vc.VerificationClient(
            f"http://127.0.0.1:{port}", username="user", password="pass", retry=vc.NO_RETRY
        ) as c:
            await bulk.run_job(c, **where, data=DATA, options=options(deadline=0.5))
    assert [link.phone_number for link in sim.secure_links] == [NUMBERS[0]]
    rows = read_rows(Path(where["output"]))
    # The row whose SMS went could not be polled either: its poll either met the
    # closing connection (failed) or found nobody until its deadline.
    assert rows[2]["request_id"] == FIRST_ID
    assert rows[2]["status"] in {"failed", "not_verified"}
    for line in (3, 4, 5):
        assert rows[line]["status"] == "failed"
        assert rows[line]["request_id"] is None
        assert rows[line]["reason"].startswith(f"{SEND}: ")
