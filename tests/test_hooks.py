"""Hooks: the events of a call and of a poll run, in order, on asyncio and trio;
a hook that raises breaks nothing; no event carries a secret or a body."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import httpx
import pytest
from hooksupport import (
    FAST_POLL,
    FAST_RETRY,
    PASSWORD,
    PHONE,
    QUESTION,
    SEND,
    USER,
    VERIFIED,
    client_for,
    failing_first,
)

import verif_client as vc
from verif_client.simulator import Script, Simulator, SimulatorConfig

pytestmark = pytest.mark.anyio


class Recorder(vc.Hooks):
    """Every event, in the order the hooks were called."""

    def __init__(self) -> None:
        self.events: list[object] = []

    def on_request_started(self, event: vc.RequestStarted) -> None:
        self.events.append(event)

    def on_retry_scheduled(self, event: vc.RetryScheduled) -> None:
        self.events.append(event)

    def on_request_ended(self, event: vc.RequestEnded) -> None:
        self.events.append(event)

    def on_limit_waited(self, event: vc.LimitWaited) -> None:
        self.events.append(event)

    def on_poll_added(self, event: vc.PollAdded) -> None:
        self.events.append(event)

    def on_poll_polled(self, event: vc.PollPolled) -> None:
        self.events.append(event)

    def on_poll_settled(self, event: vc.PollSettled) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [type(event).__name__ for event in self.events]


async def test_success_fires_started_then_ended() -> None:
    recorder = Recorder()
    async with client_for(Simulator(), recorder) as client:
        await client.send_confirmation_sms(PHONE, QUESTION)
    started, ended = recorder.events
    assert isinstance(started, vc.RequestStarted)
    assert (started.operation, started.binding) == (SEND, vc.Binding.SOAP11)
    assert (started.server_address, started.server_port) == ("simulator", 8080)
    assert isinstance(ended, vc.RequestEnded)
    assert ended.call_id == started.call_id
    assert (ended.outcome, ended.status, ended.attempt, ended.error_type) == (
        "success",
        200,
        1,
        None,
    )
    assert ended.duration >= 0


async def test_retry_fires_between_start_and_end() -> None:
    recorder = Recorder()
    async with client_for(failing_first(Simulator(), 2), recorder, retry=FAST_RETRY) as client:
        await client.get_mobile_consent_text(binding="http_post")
    assert recorder.kinds() == [
        "RequestStarted",
        "RetryScheduled",
        "RetryScheduled",
        "RequestEnded",
    ]
    first, second = recorder.events[1], recorder.events[2]
    assert isinstance(first, vc.RetryScheduled)
    assert isinstance(second, vc.RetryScheduled)
    assert [(r.attempt, r.status, r.error_type) for r in (first, second)] == [
        (1, 503, "HTTPStatusError"),
        (2, 503, "HTTPStatusError"),
    ]
    assert first.binding is vc.Binding.HTTP_POST
    assert 0 <= first.delay <= FAST_RETRY.max_backoff
    ended = recorder.events[3]
    assert isinstance(ended, vc.RequestEnded)
    assert (ended.outcome, ended.status, ended.attempt) == ("success", 200, 3)


async def test_failure_ends_with_the_error_type_and_status() -> None:
    recorder = Recorder()
    app = failing_first(Simulator(), 5)
    async with client_for(app, recorder, retry=FAST_RETRY) as client:
        with pytest.raises(vc.HTTPStatusError):
            await client.has_been_verified(1)
    async with client_for(Simulator(config=SimulatorConfig(blocked=True)), recorder) as blocked:
        with pytest.raises(vc.AuthenticationError):
            await blocked.call("GetMobileConsentText")
    assert recorder.kinds() == [
        "RequestStarted",
        "RetryScheduled",
        "RetryScheduled",
        "RequestEnded",
        "RequestStarted",
        "RequestEnded",
    ]
    exhausted, refused = recorder.events[3], recorder.events[5]
    assert isinstance(exhausted, vc.RequestEnded)
    assert (exhausted.outcome, exhausted.status, exhausted.attempt, exhausted.error_type) == (
        "error",
        503,
        3,
        "HTTPStatusError",
    )
    assert isinstance(refused, vc.RequestEnded)
    assert (refused.outcome, refused.status, refused.attempt, refused.error_type) == (
        "error",
        401,
        1,
        "AuthenticationError",
    )


async def test_cancellation_ends_the_call_as_cancelled() -> None:
    recorder = Recorder()
    arrived = anyio.Event()

    async def never_answers(scope: Any, receive: Any, send: Any) -> None:
        arrived.set()
        await anyio.sleep_forever()

    async with client_for(never_answers, recorder) as client, anyio.create_task_group() as tg:

        async def call() -> None:
            await client.call("GetMobileConsentText")

        tg.start_soon(call)
        await arrived.wait()
        tg.cancel_scope.cancel()
    assert recorder.kinds() == ["RequestStarted", "RequestEnded"]
    ended = recorder.events[1]
    assert isinstance(ended, vc.RequestEnded)
    assert (ended.outcome, ended.status, ended.attempt, ended.error_type) == (
        "cancelled",
        None,
        1,
        "cancelled",
    )


async def test_cancelled_during_backoff_counts_only_the_attempts_made() -> None:
    recorder = Recorder()
    slow_retry = vc.RetryPolicy(attempts=3, initial_backoff=60, max_backoff=60, deadline=600)

    class CancelOnRetry(vc.Hooks):
        def on_retry_scheduled(self, event: vc.RetryScheduled) -> None:
            scope.cancel()

    hooks = [recorder, CancelOnRetry()]
    async with client_for(failing_first(Simulator(), 1), hooks, retry=slow_retry) as client:
        with anyio.CancelScope() as scope:
            await client.call("GetMobileConsentText")
    assert recorder.kinds() == ["RequestStarted", "RetryScheduled", "RequestEnded"]
    ended = recorder.events[2]
    assert isinstance(ended, vc.RequestEnded)
    assert (ended.outcome, ended.attempt) == ("cancelled", 1)


async def test_waits_for_the_rate_limiter_and_a_connection_slot() -> None:
    recorder = Recorder()
    gate = anyio.Event()
    simulator = Simulator()

    async def gated(scope: Any, receive: Any, send: Any) -> None:
        await gate.wait()
        await simulator(scope, receive, send)

    async with (
        # A burst of two: the rate limiter is asked, but lets both go at once.
        client_for(
            gated, recorder, max_connections=1, rate_limiter=vc.RateLimiter(1000, burst=2)
        ) as client,
        anyio.create_task_group() as tg,
    ):
        for _ in range(2):
            tg.start_soon(client.get_mobile_consent_text)
        # Both calls are parked: one in the service, one waiting for the only slot.
        await anyio.wait_all_tasks_blocked()
        gate.set()
    waits = [event for event in recorder.events if isinstance(event, vc.LimitWaited)]
    assert sorted(wait.limit for wait in waits) == ["connection", "rate", "rate"]
    connection = next(wait for wait in waits if wait.limit == "connection")
    ended = [e for e in recorder.events if isinstance(e, vc.RequestEnded)]
    # The slot wait belongs to the call that ended second, and came before its end.
    assert connection.call_id == ended[1].call_id
    assert recorder.events.index(connection) < recorder.events.index(ended[1])
    assert connection.seconds >= 0


async def test_a_hook_that_raises_breaks_nothing_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(vc.Hooks):
        def on_request_started(self, event: vc.RequestStarted) -> None:
            raise RuntimeError("hook bug")

        def on_request_ended(self, event: vc.RequestEnded) -> None:
            raise ValueError("another hook bug")

    recorder = Recorder()
    caplog.set_level(logging.ERROR, logger="verif_client")
    async with client_for(Simulator(), [Broken(), recorder]) as client:
        for _ in range(3):
            assert await client.revoke_mobile_consent(PHONE) in (True, False)
    logged = [record for record in caplog.records if "Broken" in record.getMessage()]
    assert len(logged) == 1
    assert "on_request_started" in logged[0].getMessage()
    # The other hook saw every event all the same.
    assert recorder.kinds() == ["RequestStarted", "RequestEnded"] * 3


async def test_poll_run_fires_added_polled_settled_per_id() -> None:
    recorder = Recorder()
    simulator = Simulator()
    async with client_for(simulator, recorder) as client:
        ids = [(await client.send_confirmation_sms(PHONE, QUESTION)).request_id for _ in range(3)]
        recorder.events.clear()
        async with client.poll_verifications(ids, policy=FAST_POLL) as outcomes:
            settled = [outcome async for outcome in outcomes]
    assert {outcome.status for outcome in settled} == {vc.PollStatus.VERIFIED}
    for request_id in ids:
        mine = [
            event
            for event in recorder.events
            if isinstance(event, vc.PollAdded | vc.PollPolled | vc.PollSettled)
            and event.request_id == request_id
        ]
        kinds = [type(event).__name__ for event in mine]
        polls = len(simulator.calls(VERIFIED)) // len(ids)
        assert kinds == ["PollAdded"] + ["PollPolled"] * polls + ["PollSettled"]
        added, *polled, last = mine
        assert isinstance(added, vc.PollAdded)
        assert added.operation == VERIFIED
        assert added.timeout == FAST_POLL.timeout
        assert [event.polls for event in polled] == list(range(1, polls + 1))  # type: ignore[attr-defined]
        assert [event.status for event in polled] == [None] * (polls - 1) + [  # type: ignore[attr-defined]
            vc.PollStatus.VERIFIED
        ]
        assert isinstance(last, vc.PollSettled)
        assert (last.status, last.polls) == (vc.PollStatus.VERIFIED, polls)
        assert last.age >= 0
    # Each poll is a call of its own, with its start and end events.
    calls = [e for e in recorder.events if isinstance(e, vc.RequestEnded)]
    assert len(calls) == len(simulator.calls(VERIFIED))


async def test_no_event_carries_the_password_or_a_body() -> None:
    recorder = Recorder()
    simulator = Simulator()
    app = failing_first(simulator, 1)
    async with client_for(app, recorder, retry=FAST_RETRY, rate_limit=1000) as client:
        await client.get_mobile_consent_text()
        sent = await client.send_confirmation_sms(PHONE, QUESTION)
        await client.revoke_mobile_consent(PHONE)
        async with client.poll_verifications([sent.request_id], policy=FAST_POLL) as outcomes:
            _ = [outcome async for outcome in outcomes]
    assert {"RetryScheduled", "LimitWaited", "PollSettled"} <= set(recorder.kinds())
    shown = repr(recorder.events)
    for secret in (PASSWORD, USER, PHONE, QUESTION, "Envelope", "<soap"):
        assert secret not in shown


def test_hooks_must_have_an_event_method() -> None:
    with pytest.raises(TypeError, match="hooks: object has none of the methods"):
        vc.VerificationClient("http://x", hooks=object())  # type: ignore[arg-type]


def test_no_hooks_means_no_dispatcher() -> None:
    # The promise behind "cheap when unused": every hook point tests this one attribute.
    assert vc.VerificationClient("http://x")._hooks is None
    assert vc.VerificationClient("http://x", hooks=[])._hooks is None


class CancelWhenAllPolled(vc.Hooks):
    """Cancels ``scope`` once every id of ``ids`` has been polled at least once."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = set(ids)
        self.polled: set[int] = set()
        self.scope = anyio.CancelScope()

    def on_poll_polled(self, event: vc.PollPolled) -> None:
        self.polled.add(event.request_id)
        if self.polled >= self.ids:
            self.scope.cancel()


async def test_a_cancelled_poll_run_closes_every_id_it_leaves() -> None:
    recorder = Recorder()
    simulator = Simulator(config=SimulatorConfig(script=Script(answer="never")))
    async with client_for(simulator, None) as sender:
        ids = [(await sender.send_confirmation_sms(PHONE, QUESTION)).request_id for _ in range(3)]
    canceller = CancelWhenAllPolled(ids)
    async with client_for(simulator, [recorder, canceller]) as client:
        with canceller.scope:
            async with client.poll_verifications(ids, policy=FAST_POLL) as outcomes:
                async for _ in outcomes:
                    raise AssertionError("nobody answers: no outcome can come")
    assert canceller.scope.cancelled_caught
    settled = [event for event in recorder.events if isinstance(event, vc.PollSettled)]
    assert sorted(event.request_id for event in settled) == sorted(ids)
    assert all(event.status is None and event.polls >= 1 for event in settled)
    # Every id added is settled exactly once, and nothing follows the run's end.
    poll_kinds = [kind for kind in recorder.kinds() if kind.startswith("Poll")]
    assert poll_kinds.count("PollAdded") == len(ids)
    assert poll_kinds[-len(ids) :] == ["PollSettled"] * len(ids)


async def test_the_server_address_leaves_userinfo_of_the_base_url_out() -> None:
    recorder = Recorder()
    async with vc.VerificationClient(
        "https://proxy-user:proxy-secret@simulator:8080",
        transport=httpx.ASGITransport(app=Simulator()),
        hooks=recorder,
    ) as client:
        await client.get_mobile_consent_text(binding="http-get")
    started = recorder.events[0]
    assert isinstance(started, vc.RequestStarted)
    assert (started.server_address, started.server_port) == ("simulator", 8080)
    assert "proxy-secret" not in repr(recorder.events)
    assert "proxy-user" not in repr(recorder.events)


async def test_hooks_that_watch_only_poll_runs_see_only_poll_events() -> None:
    class PollsOnly(vc.Hooks):
        def __init__(self) -> None:
            self.events: list[object] = []

        def on_poll_settled(self, event: vc.PollSettled) -> None:
            self.events.append(event)

    hooks = PollsOnly()
    async with client_for(Simulator(), hooks) as client:
        sent = await client.send_confirmation_sms(PHONE, QUESTION)
        outcome = await client.wait_until_verified(sent.request_id, policy=FAST_POLL)
    assert outcome.status is vc.PollStatus.VERIFIED
    assert [type(event).__name__ for event in hooks.events] == ["PollSettled"]
