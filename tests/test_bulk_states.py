"""Which state each row of a bulk job ends in, as a user sees it: the output
file, ``export`` and the counts of ``bulk status``, after a clean run, after
refusals and answers that prove nothing, and after a crash and the resumes
that follow (``--resend-unknown``, ``--resend-failed``). In-process, against
the simulator, so that mutation testing sees the journal's transitions."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from relsupport import ASGIApp, read_body, request_id_rewritten

import verif_client as vc
from verif_client import bulk
from verif_client.bulk._job import IN_FLIGHT_REASON
from verif_client.bulk._sqlite import SQLiteJournal
from verif_client.simulator import Script, Simulator, SimulatorConfig
from verif_client.simulator._wire import soap_fault

pytestmark = pytest.mark.anyio

FAST = vc.PollPolicy(initial_delay=0.01, max_delay=0.05, false_means="final")
FIRST_ID = 4294967297
SEND = "SecureLink_Confirmation_SendRequestViaSms"
UNKNOWN_ID_REASON = "Invalid SecureLink RequestID"


def options(**changes: Any) -> bulk.BulkOptions:
    # One row at a time: the simulator's request ids then follow the input's order.
    return bulk.BulkOptions(
        **{"question": "Pay?", "concurrency": 1, "deadline": 0.5, "policy": FAST, **changes}
    )


def simulator() -> Simulator:
    script = Script(pending_polls=1, location_pending_polls=1)
    return Simulator(config=SimulatorConfig(script=script))


def client(app: ASGIApp, password: str = "pass") -> vc.VerificationClient:
    return vc.VerificationClient(
        "http://simulator",
        username="user",
        password=password,
        transport=httpx.ASGITransport(app=app),
        binding=vc.Binding.SOAP11,
        retry=vc.NO_RETRY,
    )


def read_rows(path: Path) -> dict[int, dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    by_line = {row["line"]: row for row in rows}
    assert len(by_line) == len(rows), "a row written twice"
    return by_line


@pytest.fixture
def where(tmp_path: Path) -> dict[str, str]:
    return {"journal": str(tmp_path / "job.sqlite"), "output": str(tmp_path / "out.jsonl")}


async def status_and_export(journal: str, path: Path) -> dict[str, int]:
    """What ``bulk status`` counts and ``bulk export`` writes, from the journal alone."""
    job = await bulk.open_job(journal, create=False)
    try:
        counts = await job.counts()
        assert await job.export(str(path)) == counts
    finally:
        await job.aclose()
    return counts


def counted(counts: dict[str, int]) -> dict[str, int]:
    return {str(state): count for state, count in counts.items() if count}


async def test_each_row_ends_in_its_answers_state_in_the_output_and_the_export(
    where: dict[str, str], tmp_path: Path
) -> None:
    sim = simulator()
    sim.script_for("5550002222", Script(answer="declined", pending_polls=1))
    sim.script_for("5550003333", Script(answer="never"))
    data = b"id,phone_number\na,5550001111\nb,5550002222\nc,5550003333\nd,555-3\n"
    seen: list[dict[str, int]] = []
    async with client(sim) as c:
        counts = await bulk.run_job(
            c, **where, data=data, options=options(), on_progress=lambda p: seen.append(+p.states)
        )
    assert seen[-1] == counted(counts)
    rows = read_rows(Path(where["output"]))
    polls = rows[4].pop("polls")
    assert isinstance(polls, int)
    assert polls >= 1
    assert rows == {
        2: {
            **{"line": 2, "id": "a", "phone_number": "5550001111", "status": "verified"},
            **{"request_id": FIRST_ID, "verified": True, "polls": 2, "reason": None},
        },
        3: {
            **{"line": 3, "id": "b", "phone_number": "5550002222", "status": "declined"},
            **{"request_id": FIRST_ID + 1, "verified": False, "polls": 2, "reason": None},
        },
        4: {
            **{"line": 4, "id": "c", "phone_number": "5550003333", "status": "not_verified"},
            **{"request_id": FIRST_ID + 2, "verified": None, "reason": None},
        },
        5: {
            **{"line": 5, "id": "d", "phone_number": "555-3", "status": "invalid"},
            "request_id": None,
            "reason": "PhoneNumber: must be 7 to 15 ASCII digits (got '555-3')",
        },
    }
    expected = {"verified": 1, "declined": 1, "not_verified": 1, "invalid": 1}
    assert counted(counts) == expected
    exported = tmp_path / "export.jsonl"
    assert counted(await status_and_export(where["journal"], exported)) == expected
    # The same rows as the output file (written as they finished), in input order.
    assert read_rows(exported) == read_rows(Path(where["output"]))
    assert list(read_rows(exported)) == [2, 3, 4, 5]


async def test_a_location_job_waits_for_both_answers_of_each_row(
    where: dict[str, str],
) -> None:
    sim = simulator()
    sim.script_for("5550002222", Script(pending_polls=1, location="denied"))
    data = b"phone_number\n5550001111\n5550002222\n"
    async with client(sim) as c:
        counts = await bulk.run_job(c, **where, data=data, options=options(location=True))
    assert counted(counts) == {"verified": 2}
    rows = read_rows(Path(where["output"]))
    location = rows[2].pop("location")
    assert location["city"] == "Austin"
    assert rows[2] == {
        **{"line": 2, "id": None, "phone_number": "5550001111", "status": "verified"},
        **{"request_id": FIRST_ID, "verified": True, "polls": 2, "reason": None},
        "location_status": "located",
    }
    assert rows[3] == {
        **{"line": 3, "id": None, "phone_number": "5550002222", "status": "verified"},
        **{"request_id": FIRST_ID + 1, "verified": True, "polls": 2, "reason": None},
        # The service answers a denial as "not available" until the deadline.
        **{"location_status": "timed_out", "location": None},
    }


def refusing(sim: Simulator, answers: dict[str, tuple[int, str, bytes]]) -> ASGIApp:
    """The simulator, except that an SMS to one of ``answers``' numbers gets that
    answer (status, content type, body) and is never sent."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await sim(scope, receive, send)
        body = await read_body(receive)
        for number, (status, content_type, content) in answers.items():
            if SEND.encode() in body and f">{number}<".encode() in body:
                headers = [(b"content-type", content_type.encode())]
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": content})
                return None

        async def again() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        return await sim(scope, again, send)

    return app


XML = "text/xml; charset=utf-8"
REFUSALS = {
    # Refusals the service answered in a form we could read: nobody was texted.
    "5550000400": (400, "text/html", b"<html><title>Bad Request</title></html>"),
    "5550000401": (500, XML, soap_fault("soap11", "Client", "PhoneNumber is not valid")),
    # Answers that prove nothing: the SMS may have gone.
    "5550000500": (500, "text/html", b"<html><title>Runtime Error</title></html>"),
    "5550000502": (502, "text/html", b"<html><title>Bad Gateway</title></html>"),
    "5550000501": (500, XML, soap_fault("soap11", "Server", "Timeout expired")),
}


async def test_refused_sends_are_failed_and_unprovable_ones_unknown_and_each_is_resent_on_request(
    where: dict[str, str],
) -> None:
    sim = simulator()
    data = b"phone_number\n" + b"".join(f"{n}\n".encode() for n in [*REFUSALS, "5550001111"])
    async with client(refusing(sim, REFUSALS)) as c:
        counts = await bulk.run_job(c, **where, data=data, options=options())
    rows = read_rows(Path(where["output"]))
    states = {row["phone_number"]: row["status"] for row in rows.values()}
    assert states == {
        **{"5550000400": "failed", "5550000401": "failed", "5550001111": "verified"},
        **{"5550000500": "unknown", "5550000502": "unknown", "5550000501": "unknown"},
    }
    assert "HTTP 400" in rows[2]["reason"]
    assert "PhoneNumber is not valid" in rows[3]["reason"]
    assert "HTTP 502" in rows[5]["reason"]
    assert "Timeout expired" in rows[6]["reason"]
    assert all(row["request_id"] is None for row in rows.values() if row["status"] != "verified")
    assert counted(counts) == {"failed": 2, "unknown": 3, "verified": 1}
    assert len(sim.calls(SEND)) == 1

    # The service is well again. A plain rerun sends nothing; --resend-failed
    # sends only the refused rows; --resend-unknown then the rest.
    async with client(sim) as c:
        counts = await bulk.run_job(c, **where, options=options())
        assert counted(counts) == {"failed": 2, "unknown": 3, "verified": 1}
        assert len(sim.calls(SEND)) == 1
        counts = await bulk.run_job(c, **where, options=options(resend_failed=True))
        assert counted(counts) == {"unknown": 3, "verified": 3}
        assert len(sim.calls(SEND)) == 3
        resent = {link.phone_number for link in sim.secure_links[1:]}
        assert resent == {"5550000400", "5550000401"}
        counts = await bulk.run_job(c, **where, options=options(resend_unknown=True))
        assert counted(counts) == {"verified": 6}
        assert len(sim.calls(SEND)) == 6
    rows = read_rows(Path(where["output"]))
    assert {row["status"] for row in rows.values()} == {"verified"}
    assert all(row["reason"] is None for row in rows.values())


async def test_a_crash_leaves_the_row_in_flight_unknown_and_resumes_finish_the_rest(
    where: dict[str, str], tmp_path: Path
) -> None:
    sim = simulator()
    data = b"id,phone_number\na,5550001111\nb,5550002222\nc,5550003333\nd,5550004444\n"
    async with client(sim) as c:
        # A run that died: line 2 in flight, line 3 sent (its answer not yet
        # read), line 4 sent under an id the service no longer knows, line 5
        # not started.
        journal = SQLiteJournal(where["journal"])
        bulk.load_input(journal, data, options(), c.codec())
        texted = await c.send_confirmation_sms("5550002222", "Pay?")
        journal.mark_sending(2)
        journal.mark_sending(3)
        journal.mark_sent(3, texted.request_id)
        journal.mark_sending(4)
        journal.mark_sent(4, 77)
        journal._db.close()  # killed: nothing else is written
        journal._release()
        assert counted(await status_and_export(where["journal"], tmp_path / "e.jsonl")) == {
            **{"queued": 1, "sending": 1, "sent": 2}
        }

        counts = await bulk.run_job(c, **where, options=options())
        assert counted(counts) == {"unknown": 1, "verified": 2, "failed": 1}
        rows = read_rows(Path(where["output"]))
        assert rows[2] == {
            **{"line": 2, "id": "a", "phone_number": "5550001111", "status": "unknown"},
            **{"request_id": None, "reason": IN_FLIGHT_REASON},
        }
        assert rows[3] == {
            **{"line": 3, "id": "b", "phone_number": "5550002222", "status": "verified"},
            **{"request_id": texted.request_id, "verified": True, "polls": 2, "reason": None},
        }
        assert rows[4] == {
            **{"line": 4, "id": "c", "phone_number": "5550003333", "status": "failed"},
            **{"request_id": 77, "verified": None, "polls": 1, "reason": UNKNOWN_ID_REASON},
        }
        assert rows[5]["status"] == "verified"
        assert [link.phone_number for link in sim.secure_links] == ["5550002222", "5550004444"]

        # A row that failed while it was polled had its SMS: never resent.
        counts = await bulk.run_job(
            c, **where, options=options(resend_unknown=True, resend_failed=True)
        )
        assert counted(counts) == {"verified": 3, "failed": 1}
        assert [link.phone_number for link in sim.secure_links][2:] == ["5550001111"]
    rows = read_rows(Path(where["output"]))
    assert rows[2]["status"] == "verified"
    assert rows[2]["request_id"] == sim.secure_links[2].request_id
    assert rows[4]["reason"] == UNKNOWN_ID_REASON


async def test_errors_about_the_input_and_the_journal_name_them(where: dict[str, str]) -> None:
    bad = b"number\n5550001111\n"
    header = r"march\.csv: line 1: the header has no phone_number column \(found 'number'\)$"
    async with client(simulator()) as c:
        with pytest.raises(bulk.BulkInputError, match=f"^{header}"):
            await bulk.run_job(c, **where, data=bad, options=options(), input_name="march.csv")
        job = await bulk.open_job(where["journal"])
        try:
            # A job run directly checks its input as it loads it.
            run = bulk.JobRun(
                c, where["output"], bad, options(), print, bulk.Stopper(), "march.csv"
            )
            with pytest.raises(bulk.BulkInputError, match=f"^{header}"):
                await job.run(run)
            # The journal now exists, with no input.
            no_input = f"^{re.escape(where['journal'])}: a new journal needs its input$"
            with pytest.raises(bulk.BulkInputError, match=no_input):
                await job.run(
                    bulk.JobRun(c, where["output"], None, options(), print, bulk.Stopper())
                )
            # --rate for a whole job: the journal's limiter, at the rate asked.
            assert repr(job.rate_limiter(5.0)) == "RateLimiter(rate=5.0, burst=1)"
        finally:
            await job.aclose()


def refusing_polls(sim: Simulator, number: str) -> ASGIApp:
    """The simulator, except that every poll about the SMS to ``number`` is refused (400)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await sim(scope, receive, send)
        body = await read_body(receive)
        ids = [link.request_id for link in sim.secure_links if link.phone_number == number]
        if SEND.encode() not in body and any(f">{i}<".encode() in body for i in ids):
            headers = [(b"content-type", b"text/html")]
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": b"<title>Bad Request</title>"})
            return None

        async def again() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        return await sim(scope, again, send)

    return app


async def test_a_row_whose_polls_are_refused_fails_with_the_reason_and_is_never_resent(
    where: dict[str, str],
) -> None:
    sim = simulator()
    data = b"phone_number\n5550001111\n5550002222\n"
    async with client(refusing_polls(sim, "5550002222")) as c:
        counts = await bulk.run_job(c, **where, data=data, options=options(location=True))
    assert counted(counts) == {"verified": 1, "failed": 1}
    row = read_rows(Path(where["output"]))[3]
    reason = row.pop("reason")
    assert reason.startswith("SecureLink_SecurityCode_HasBeenVerified: HTTP 400")
    assert row == {
        **{"line": 3, "id": None, "phone_number": "5550002222", "status": "failed"},
        **{"request_id": FIRST_ID + 1, "verified": None, "polls": 1},
        **{"location_status": "failed", "location": None},
    }
    # Its SMS was sent: --resend-failed leaves it alone.
    async with client(sim) as c:
        counts = await bulk.run_job(c, **where, options=options(resend_failed=True))
    assert counted(counts) == {"verified": 1, "failed": 1}
    assert len(sim.calls(SEND)) == 2


async def test_a_rerun_names_the_same_input_or_none_and_a_different_one_is_refused(
    where: dict[str, str],
) -> None:
    data = b"phone_number\n5550001111\n"
    async with client(simulator()) as c:
        await bulk.run_job(c, **where, data=data, options=options())
        counts = await bulk.run_job(c, **where, data=data, options=options())
        assert counted(counts) == {"verified": 1}
        with pytest.raises(bulk.JournalError, match="belongs to a different input file"):
            await bulk.run_job(c, **where, data=data + b"5550002222\n", options=options())


async def test_a_request_id_the_service_gives_twice_never_answers_the_second_row(
    where: dict[str, str],
) -> None:
    # Every SMS is answered with the first request's id.
    same_id = request_id_rewritten(simulator(), SEND.encode(), FIRST_ID)
    data = b"phone_number\n5550001111\n5550002222\n"
    async with client(same_id) as c:
        counts = await bulk.run_job(c, **where, data=data, options=options())
    assert counted(counts) == {"verified": 1, "unknown": 1}
    rows = read_rows(Path(where["output"]))
    assert rows[2]["status"] == "verified"
    assert rows[3]["status"] == "unknown"
    assert rows[3]["reason"] == (
        f"the service answered with request id {FIRST_ID}, which it had already given "
        "line 2: this row's answer cannot be told apart, so it is not polled"
    )


async def test_refused_credentials_stop_the_job_with_its_rows_queued_and_a_rerun_carries_on(
    where: dict[str, str],
) -> None:
    sim = Simulator(
        credentials=("user", "pass"), config=SimulatorConfig(script=Script(pending_polls=1))
    )
    data = b"phone_number\n5550001111\n5550002222\n"
    async with client(sim, password="wrong") as wrong:
        with pytest.raises(bulk.JobStoppedError, match="the service refused the credentials"):
            await bulk.run_job(wrong, **where, data=data, options=options())
    assert counted(await status_and_export(where["journal"], Path(where["output"]))) == {
        "queued": 2
    }
    async with client(sim) as right:
        counts = await bulk.run_job(right, **where, options=options())
    assert counted(counts) == {"verified": 2}
