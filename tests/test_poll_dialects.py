"""The poller and ``bulk run`` against both ways the service can say "nobody
answered yet": nil (a nullable bool) or false (a plain .NET bool).

With the defaults, a service of the bool shape gives verified rows, never
declined ones; a service of the nil shape that is answered "no" gives declined.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import attrs
import httpx
import pytest

import verif_client as vc
from verif_client.bulk._input import load_input
from verif_client.bulk._job import BULK_POLL_POLICY, BulkOptions
from verif_client.bulk._open import open_journal
from verif_client.bulk._runner import run_bulk
from verif_client.simulator import Script, Simulator, SimulatorConfig, serve, serve_in_thread

VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"
# The default classification (false_means="auto"), on a schedule fast enough for tests.
FAST = vc.PollPolicy(initial_delay=0, multiplier=1, max_delay=0.001, jitter=0, timeout=30)
# One poll at once, the next never (its due time is past the timeout): a run
# that cannot settle ends TIMED_OUT after one answer, however slow the machine
# (a short timeout instead could cut that one poll, and nothing would be read).
ONCE = vc.PollPolicy(initial_delay=1e-6, multiplier=1e9, max_delay=60, jitter=0, timeout=1)
FAST_RETRY = vc.RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=0.002, deadline=10)
WHERE = pytest.mark.parametrize("where", ["in-process", "loopback"])


@asynccontextmanager
async def connected(app: Any, where: str, **options: Any) -> AsyncIterator[vc.VerificationClient]:
    options = {"username": "tester", "password": "tester-password", **options}
    if where == "in-process":
        transport = httpx.ASGITransport(app=app)
        async with vc.VerificationClient("http://sim", transport=transport, **options) as client:
            yield client
    else:
        async with serve(app) as server, vc.VerificationClient(server.base_url, **options) as c:
            yield c


DEFAULT_SCRIPT = Script()


def simulator(dialect: str, script: Script = DEFAULT_SCRIPT) -> Simulator:
    config = SimulatorConfig(verified_dialect=dialect, script=script)  # type: ignore[arg-type]
    return Simulator(config=config)


async def send(client: vc.VerificationClient, count: int, first: int = 0) -> list[int]:
    ids = []
    for index in range(first, first + count):
        sent = await client.send_confirmation_sms(f"555{index:07d}", "Did you ask to pay?")
        ids.append(sent.request_id)
    return ids


async def poll(client: vc.VerificationClient, ids: list[int], policy: vc.PollPolicy) -> list[Any]:
    with anyio.fail_after(30):
        async with client.poll_verifications(ids, policy=policy) as outcomes:
            return [outcome async for outcome in outcomes]


# -- the poller ---------------------------------------------------------------


@pytest.mark.anyio
@WHERE
async def test_bool_shape_with_defaults_is_verified_never_declined(where: str) -> None:
    sim = simulator("bool", Script(pending_polls=3))
    async with connected(sim, where) as client:
        settled = await poll(client, await send(client, 10), FAST)
    assert {outcome.status for outcome in settled} == {vc.PollStatus.VERIFIED}
    assert {outcome.attempts for outcome in settled} == {4}


@pytest.mark.anyio
@WHERE
async def test_nil_shape_with_a_decline_is_declined(where: str) -> None:
    sim = simulator("nil", Script(answer="declined", pending_polls=2))
    async with connected(sim, where) as client:
        settled = await poll(client, await send(client, 5), FAST)
    assert {outcome.status for outcome in settled} == {vc.PollStatus.DECLINED}
    assert {outcome.attempts for outcome in settled} == {3}
    assert all(outcome.result == vc.VerificationResult(False) for outcome in settled)


@pytest.mark.anyio
@WHERE
async def test_auto_reads_false_as_pending_until_a_nil_is_seen(where: str) -> None:
    """A decline seen before any nil is pending; once a poll run has seen a nil
    from another id of the same service, the decline is final at its next poll."""
    sim = simulator("nil", Script.manual())
    async with connected(sim, where) as client:
        (early,) = await send(client, 1)
        sim.decline(early)
        (alone,) = await poll(client, [early], ONCE)
        assert alone.status is vc.PollStatus.TIMED_OUT
        assert alone.result == vc.VerificationResult(False)
        (pending,) = await send(client, 1, first=1)
        # Separate runs, so the nil is seen before the decline is read again
        # whatever order a single run's workers would poll them in.
        (waiting,) = await poll(client, [pending], ONCE)
        (declined,) = await poll(client, [early], FAST)
    assert waiting.status is vc.PollStatus.TIMED_OUT
    assert waiting.result == vc.VerificationResult(None)
    assert declined.status is vc.PollStatus.DECLINED
    assert declined.attempts == 1


@pytest.mark.anyio
@WHERE
@pytest.mark.parametrize("lesson", ["a pending id", "an unknown id"])
async def test_any_nil_the_client_saw_teaches_it(where: str, lesson: str) -> None:
    """A nil read by has_been_verified(), with an ErrorMessage or not, counts."""
    sim = simulator("nil", Script.manual())
    async with connected(sim, where) as client:
        declined, pending = await send(client, 2)
        sim.decline(declined)
        seen = await client.has_been_verified(pending if lesson == "a pending id" else 99)
        assert seen.verified is None
        (outcome,) = await poll(client, [declined], FAST)
    assert outcome.status is vc.PollStatus.DECLINED
    assert outcome.attempts == 1


@pytest.mark.anyio
@WHERE
async def test_bool_shape_decline_cannot_be_told_from_pending_and_times_out(where: str) -> None:
    sim = simulator("bool", Script(answer="declined", pending_polls=0))
    async with connected(sim, where) as client:
        settled = await poll(client, await send(client, 3), ONCE)
    assert {outcome.status for outcome in settled} == {vc.PollStatus.TIMED_OUT}
    assert {outcome.result for outcome in settled} == {vc.VerificationResult(False)}


@pytest.mark.anyio
@WHERE
@pytest.mark.parametrize("dialect", ["nil", "bool"])
async def test_an_error_message_fails_at_once_in_both_shapes(where: str, dialect: str) -> None:
    sim = simulator(dialect)
    async with connected(sim, where) as client:
        (outcome,) = await poll(client, [987654321], FAST)
    assert outcome.status is vc.PollStatus.FAILED
    assert outcome.attempts == 1
    assert outcome.result.error_message == "Invalid SecureLink RequestID"
    assert outcome.result.verified is (False if dialect == "bool" else None)


@pytest.mark.anyio
@WHERE
@pytest.mark.parametrize(
    ("dialect", "false_means", "expected"),
    [
        ("bool", "final", vc.PollStatus.DECLINED),  # wrong for this service, as asked
        ("nil", "pending", vc.PollStatus.TIMED_OUT),
        ("nil", "final", vc.PollStatus.DECLINED),
    ],
)
async def test_false_means_can_be_fixed(
    where: str, dialect: str, false_means: str, expected: vc.PollStatus
) -> None:
    sim = simulator(dialect, Script(answer="declined", pending_polls=0))
    # A decline settles at its first poll; a timeout needs one answer read first.
    schedule = FAST if expected is vc.PollStatus.DECLINED else ONCE
    policy = attrs.evolve(schedule, false_means=false_means)
    async with connected(sim, where) as client:
        settled = await poll(client, await send(client, 2), policy)
    assert {outcome.status for outcome in settled} == {expected}
    assert {outcome.result for outcome in settled} == {vc.VerificationResult(False)}


def garbling(app: Any, bad_answers: int) -> Any:
    """``app`` with its first ``bad_answers`` HasBeenVerified answers cut in half."""
    left = [bad_answers]

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not left[0]:
            await app(scope, receive, send)
            return
        body = await receive()
        is_poll = VERIFIED.encode() in body.get("body", b"") + scope["path"].encode()
        delivered = [False]

        async def replay() -> Any:
            if not delivered[0]:
                delivered[0] = True
                return body
            return await receive()

        async def cut(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": message["body"][: len(message["body"]) // 2]}
            elif message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message["headers"] if k != b"content-length"]
                message = {**message, "headers": headers}
            await send(message)

        if is_poll:
            left[0] -= 1
        await app(scope, replay, cut if is_poll else send)

    return wrapped


@pytest.mark.anyio
@WHERE
@pytest.mark.parametrize("binding", list(vc.Binding))
async def test_a_garbled_answer_is_asked_again_and_does_not_end_the_id(
    where: str, binding: vc.Binding
) -> None:
    sim = simulator("nil", Script(pending_polls=2))
    policy = attrs.evolve(FAST, retry=FAST_RETRY)
    async with connected(garbling(sim, 1), where, binding=binding) as client:
        (outcome,) = await poll(client, await send(client, 1), policy)
    assert outcome.status is vc.PollStatus.VERIFIED
    assert outcome.attempts == 2  # polls: the garbled answer was asked again within the first
    assert len(sim.calls(VERIFIED)) == 3


@pytest.mark.anyio
@WHERE
async def test_garbled_answers_past_the_retry_policy_fail(where: str) -> None:
    sim = simulator("nil", Script.manual())
    policy = attrs.evolve(FAST, retry=FAST_RETRY)
    async with connected(garbling(sim, 100), where) as client:
        (outcome,) = await poll(client, await send(client, 1), policy)
    assert outcome.status is vc.PollStatus.FAILED
    assert isinstance(outcome.error, vc.DecodeError)
    assert len(sim.calls(VERIFIED)) == FAST_RETRY.attempts


def test_false_means_is_the_one_spelling() -> None:
    # The deprecated false_is_final was never published, so it went (docs/versioning.md).
    assert vc.PollPolicy().false_means == "auto"
    assert attrs.evolve(vc.PollPolicy(false_means="final"), timeout=5).false_means == "final"
    with pytest.raises(TypeError, match="false_is_final"):
        vc.PollPolicy(false_is_final=True)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="false_means"):
        vc.PollPolicy(false_means="maybe")  # type: ignore[arg-type]


# -- bulk run -------------------------------------------------------------------

NUMBERS = "".join(f"51255501{index:02d}\n" for index in range(8))
BULK_FAST = attrs.evolve(BULK_POLL_POLICY, initial_delay=0, multiplier=1, max_delay=0.001)


async def bulk(app: Any, where: str, tmp_path: Path) -> list[dict[str, Any]]:
    journal = open_journal(str(tmp_path / "job.sqlite"))
    options = BulkOptions(question="Pay?", concurrency=4, deadline=20, policy=BULK_FAST)
    output = tmp_path / "out.jsonl"
    try:
        load_input(journal, ("phone_number\n" + NUMBERS).encode(), options, vc.Binding.SOAP11)
        with anyio.fail_after(60):
            async with connected(app, where) as client:
                await run_bulk(client, journal, str(output), options)
    finally:
        journal.close()
    return [json.loads(line) for line in output.read_text().splitlines()]


@pytest.mark.anyio
@WHERE
async def test_bulk_run_on_the_bool_shape_gives_verified_rows(where: str, tmp_path: Path) -> None:
    rows = await bulk(simulator("bool", Script(pending_polls=2)), where, tmp_path)
    assert [row["status"] for row in rows] == ["verified"] * 8


@pytest.mark.anyio
@WHERE
async def test_bulk_run_on_the_nil_shape_with_a_decline_gives_declined(
    where: str, tmp_path: Path
) -> None:
    sim = simulator("nil", Script(pending_polls=2))
    sim.script_for("5125550103", Script(answer="declined", pending_polls=1))
    rows = await bulk(sim, where, tmp_path)
    by_phone = {row["phone_number"]: row["status"] for row in rows}
    assert by_phone.pop("5125550103") == "declined"
    assert set(by_phone.values()) == {"verified"}


@pytest.mark.parametrize("dialect", ["bool", "nil"])
def test_the_cli_bulk_run_defaults_to_auto(tmp_path: Path, dialect: str) -> None:
    sim = simulator(dialect, Script(pending_polls=1))
    sim.script_for("5125550103", Script(answer="declined", pending_polls=1))
    numbers = tmp_path / "in.csv"
    numbers.write_text("phone_number\n5125550100\n5125550103\n")
    output = tmp_path / "out.jsonl"
    with serve_in_thread(sim) as server:
        env = {**os.environ, "VERIF_BASE_URL": server.base_url, "VERIF_BINDING": "http-post"}
        command = [sys.executable, "-m", "verif_client._cli", "bulk", "run"]
        command += ["--input", str(numbers), "--question", "Pay?", "--output", str(output)]
        command += ["--journal", str(tmp_path / "job.sqlite"), "--deadline", "4s"]
        run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    states = {row["phone_number"]: row["status"] for row in map(json.loads, output.open())}
    # The bool shape cannot show a "no": it stays false, like pending, to the deadline.
    declined = "declined" if dialect == "nil" else "not_verified"
    assert states == {"5125550100": "verified", "5125550103": declined}


def test_the_cli_refuses_an_unknown_false_means(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "verif_client._cli", "bulk", "run", "--false-means", "x"]
    command += ["--journal", str(tmp_path / "j"), "--output", str(tmp_path / "o")]
    run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "--false-means" in run.stderr
