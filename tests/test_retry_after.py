"""Retry-After on 429 and 503: a server of the test's own that asks to wait, in both forms."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import anyio
import anyio.abc
import pytest
from test_transport_bad_peers import (
    GUARD,
    NOT_VERIFIED,
    SMS_SENT,
    VERIFIED_TRUE,
    Wire,
    client,
    http_response,
    raw_server,
    send_sms,
)

import verif_client as vc
from verif_client._retry import retry_after
from verif_client._slowdown import CLIMB_SECONDS, FLOOR, Slowdown

pytestmark = pytest.mark.anyio

POLICY = vc.RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=0.002, deadline=30)


def asking(status: bytes, wait: str) -> bytes:
    return http_response(
        b"Slow down", status=status, headers=b"Retry-After: %s\r\n" % wait.encode()
    )


def http_date(offset: float) -> str:
    return format_datetime(datetime.now(UTC) + timedelta(seconds=offset), usegmt=True)


class Scripted:
    """Answers requests, on any connection, with the next of ``answers`` (the last one repeats)."""

    def __init__(self, *answers: bytes) -> None:
        self.answers = list(answers)
        self.requests = 0

    async def __call__(self, stream: anyio.abc.ByteStream) -> None:
        wire = Wire(stream)
        while await wire.request() is not None:
            self.requests += 1
            answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            await stream.send(answer)


class Retries(vc.Hooks):
    def __init__(self) -> None:
        self.delays: list[float] = []

    def on_retry_scheduled(self, event: vc.RetryScheduled) -> None:
        self.delays.append(event.delay)


async def test_a_429_to_a_send_was_refused_so_it_is_sent_again_after_the_wait() -> None:
    server, hooks = Scripted(asking(b"429 Too Many Requests", "0"), SMS_SENT), Retries()
    async with raw_server(server) as port, client(port, retry=POLICY, hooks=hooks) as c:
        with anyio.fail_after(GUARD):
            assert (await send_sms(c)).request_id == 7
    assert server.requests == 2
    assert hooks.delays == [0.0]


async def test_retry_after_in_seconds_is_the_wait_before_the_next_attempt() -> None:
    server, hooks = Scripted(asking(b"503 Service Unavailable", "1"), NOT_VERIFIED), Retries()
    async with raw_server(server) as port, client(port, retry=POLICY, hooks=hooks) as c:
        with anyio.fail_after(GUARD):
            assert (await c.has_been_verified(7)).verified is False
    assert hooks.delays == [1.0]  # the server's value, not the policy's jittered backoff


async def test_retry_after_as_a_date_is_waited_for() -> None:
    past = asking(b"429 Too Many Requests", http_date(-60))
    server, hooks = Scripted(past, NOT_VERIFIED), Retries()
    async with raw_server(server) as port, client(port, retry=POLICY, hooks=hooks) as c:
        with anyio.fail_after(GUARD):
            assert (await c.has_been_verified(7)).verified is False
    assert hooks.delays == [0.0]


@pytest.mark.parametrize("wait", ["3600", "date"])
async def test_a_wait_past_the_deadline_fails_at_once_with_the_value(wait: str) -> None:
    value = http_date(3600) if wait == "date" else wait
    server = Scripted(asking(b"429 Too Many Requests", value))
    async with raw_server(server) as port, client(port, retry=POLICY) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.HTTPStatusError) as caught:
            await c.has_been_verified(7)
    assert server.requests == 1
    error = caught.value
    assert error.status_code == 429
    assert error.retry_after is not None
    assert 3500 < error.retry_after <= 3600
    assert "Retry-After" in str(error)
    assert "deadline of 30 s" in str(error)


async def test_a_503_to_a_send_is_not_repeated_unless_the_operator_opts_in() -> None:
    refused = asking(b"503 Service Unavailable", "0")
    server = Scripted(refused, SMS_SENT)
    async with raw_server(server) as port, client(port, retry=POLICY) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.HTTPStatusError) as caught:
            await send_sms(c)
    assert caught.value.status_code == 503
    assert caught.value.retry_after == 0.0
    assert server.requests == 1
    server = Scripted(refused, SMS_SENT)
    opted_in = vc.RetryPolicy(attempts=3, initial_backoff=0.001, retry_sends_on_503=True)
    async with raw_server(server) as port, client(port, retry=opted_in) as c:
        with anyio.fail_after(GUARD):
            assert (await send_sms(c)).request_id == 7
    assert server.requests == 2


async def test_a_429_without_retry_after_is_retried_with_the_policys_backoff() -> None:
    server = Scripted(http_response(b"busy", status=b"429 Too Many Requests"), SMS_SENT)
    async with raw_server(server) as port, client(port, retry=POLICY) as c:
        with anyio.fail_after(GUARD):
            assert (await send_sms(c)).request_id == 7
    assert server.requests == 2


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 5 ", 5.0),
        ("0", 0.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 60.0),
        ("Wed, 21 Oct 2015 07:26:00 GMT", 0.0),  # in the past
        ("soon", None),
        ("-5", None),
        ("", None),
    ],
)
def test_retry_after_values(value: str, expected: float | None) -> None:
    now = datetime(2015, 10, 21, 7, 27, tzinfo=UTC).timestamp()
    assert retry_after([("Retry-After", value)], now=lambda: now) == expected
    assert retry_after([("retry-after", value)], now=lambda: now) == expected


def test_no_retry_after_is_none() -> None:
    assert retry_after([("Content-Type", "text/xml")]) is None


# -- a 429 slows the whole client: a poll run, a bulk job ---------------------


class Paces(vc.Hooks):
    def __init__(self) -> None:
        self.changes: list[vc.RateChanged] = []

    def on_rate_changed(self, event: vc.RateChanged) -> None:
        self.changes.append(event)


async def test_a_429_in_a_poll_run_slows_the_whole_run_and_is_reported() -> None:
    from prometheus_client import CollectorRegistry

    from verif_client._prometheus import PrometheusHooks

    registry = CollectorRegistry()
    paces = Paces()
    server = Scripted(asking(b"429 Too Many Requests", "0"), VERIFIED_TRUE)
    hooks = [paces, PrometheusHooks(registry)]
    async with (
        raw_server(server) as port,
        client(port, retry=POLICY, rate_limit=1000.0, hooks=hooks) as c,
    ):
        assert c.slowed_to is None
        with anyio.fail_after(GUARD):
            async with c.poll_verifications(range(1, 11)) as outcomes:
                statuses = [outcome.status async for outcome in outcomes]
        slowed = c.slowed_to
    assert statuses == [vc.PollStatus.VERIFIED] * 10
    assert server.requests == 11  # every id once, and the refused poll again
    [change] = paces.changes
    assert change.operation == "SecureLink_SecurityCode_HasBeenVerified"
    assert change.retry_after == 0.0
    assert change.rate is not None
    assert change.rate <= 500.0  # halved from the limit at least
    assert slowed is not None
    assert slowed <= 1000.0
    labels = {"operation": "SecureLink_SecurityCode_HasBeenVerified"}
    assert registry.get_sample_value("verif_client_slowdowns_total", labels) == 1.0


def test_the_pace_halves_on_each_429_and_climbs_back_slowly() -> None:
    now = [100.0]
    lifted: list[bool] = []
    slowdown = Slowdown(None, 40.0, lambda: now[0], lambda: lifted.append(True))
    assert slowdown.refused(pace=1000.0, retry_after=None, sent_at=now[0] - 1) == 20.0
    assert slowdown.rate == 20.0  # half the limit, even when going faster
    # More 429s to requests sent before that cut: no further cut.
    for _ in range(10):
        assert slowdown.refused(pace=1000.0, retry_after=None, sent_at=now[0] - 1) is None
    assert slowdown.rate == 20.0
    now[0] += 1
    assert slowdown.refused(pace=10.0, retry_after=5.0, sent_at=now[0]) == 5.0
    assert slowdown.rate == 5.0  # half the pace when it was slower than the limit
    now[0] += CLIMB_SECONDS
    assert slowdown.rate == 10.0
    now[0] += 10 * CLIMB_SECONDS
    assert slowdown.rate == 40.0  # never past the limit
    for _ in range(40):
        slowdown.refused(pace=0.0, retry_after=None, sent_at=now[0])
        now[0] += 0.001
    assert slowdown.rate == pytest.approx(FLOOR, rel=0.01)


async def test_the_slowdown_lifts_itself_at_the_limit_and_holds_requests_for_retry_after() -> None:
    now = [0.0]
    lifted: list[bool] = []
    slowdown = Slowdown(None, 40.0, lambda: now[0], lambda: lifted.append(True))
    slowdown.refused(pace=40.0, retry_after=3600.0, sent_at=0.0)
    now[0] += 10 * CLIMB_SECONDS  # climbed back, but Retry-After has not passed
    with anyio.move_on_after(0.05) as scope:
        await slowdown.acquire()
    assert scope.cancelled_caught
    assert lifted == []
    now[0] += 3600.0
    await slowdown.acquire()
    assert lifted == [True]


async def test_a_poll_still_refused_after_its_retries_is_polled_again_not_failed() -> None:
    refused = asking(b"429 Too Many Requests", "0")
    # More refusals than the policy's attempts: the call itself fails with the 429.
    server = Scripted(*[refused] * (POLICY.attempts + 1), VERIFIED_TRUE)
    policy = vc.PollPolicy(retry=POLICY, initial_delay=0.001, max_delay=0.002, timeout=GUARD)
    async with raw_server(server) as port, client(port, retry=POLICY) as c:
        with anyio.fail_after(GUARD):
            outcome = await c.wait_until_verified(7, policy=policy)
    assert outcome.status is vc.PollStatus.VERIFIED
    assert outcome.error is None
    assert server.requests == POLICY.attempts + 2
