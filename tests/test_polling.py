"""Polling HasBeenVerified and MobileLocation_GetResult for many ids at once."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import defaultdict
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
import sniffio
import trio.lowlevel
import trio.testing

import verif_client as vc
from verif_client.simulator import Script, Simulator, SimulatorConfig

FAST = vc.PollPolicy(initial_delay=0, multiplier=1, max_delay=0, jitter=0, timeout=30)
FAST_RETRY = vc.RetryPolicy(attempts=8, initial_backoff=0.001, max_backoff=0.004, deadline=10)
VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"
LOCATION = "SecureLink_MobileLocation_GetResult"


def client_for(app: Any, **options: Any) -> vc.VerificationClient:
    options = {"username": "tester", "password": "tester-password", **options}
    return vc.VerificationClient(
        "http://simulator", transport=httpx.ASGITransport(app=app), **options
    )


async def send_many(client: vc.VerificationClient, count: int) -> list[int]:
    ids = []
    for index in range(count):
        sent = await client.send_confirmation_sms(f"555{index:07d}", "Did you ask to pay?")
        ids.append(sent.request_id)
    return ids


@pytest.mark.anyio
async def test_each_id_is_verified_after_its_scripted_polls() -> None:
    simulator = Simulator(config=SimulatorConfig(script=Script(pending_polls=3)))
    async with client_for(simulator) as client:
        ids = await send_many(client, 50)
        async with client.poll_verifications(ids, policy=FAST, max_concurrency=8) as outcomes:
            settled = [outcome async for outcome in outcomes]
    assert sorted(outcome.request_id for outcome in settled) == sorted(ids)
    assert {outcome.status for outcome in settled} == {vc.PollStatus.VERIFIED}
    assert {outcome.attempts for outcome in settled} == {4}
    assert all(outcome.result == vc.VerificationResult(verified=True) for outcome in settled)


@pytest.mark.anyio
async def test_a_request_never_answered_times_out_at_the_deadline() -> None:
    simulator = Simulator(config=SimulatorConfig(script=Script(answer="never")))
    policy = vc.PollPolicy(initial_delay=0.001, max_delay=0.002, timeout=0.5)
    async with client_for(simulator) as client:
        (request_id,) = await send_many(client, 1)
        outcome = await client.wait_until_verified(request_id, policy=policy)
    assert outcome.status is vc.PollStatus.TIMED_OUT
    assert outcome.result == vc.VerificationResult(verified=None)
    assert outcome.attempts == len(simulator.calls(VERIFIED)) > 1


@pytest.mark.anyio
async def test_a_no_before_any_nil_is_pending_by_default_and_final_when_asked() -> None:
    simulator = Simulator(config=SimulatorConfig(script=Script(answer="declined", pending_polls=0)))
    short = vc.PollPolicy(initial_delay=0.001, max_delay=0.002, timeout=0.03)
    async with client_for(simulator) as client:
        (request_id,) = await send_many(client, 1)
        pending = await client.wait_until_verified(request_id, policy=short)
        final = await client.wait_until_verified(
            request_id, policy=vc.PollPolicy(initial_delay=0, false_means="final")
        )
    assert pending.status is vc.PollStatus.TIMED_OUT
    assert pending.result == vc.VerificationResult(verified=False)
    assert final.status is vc.PollStatus.DECLINED
    assert final.attempts == 1


@pytest.mark.anyio
async def test_a_shared_location_is_located_and_a_denied_one_times_out() -> None:
    simulator = Simulator()
    policy = vc.PollPolicy(initial_delay=0, max_delay=0.002, timeout=0.5)
    async with client_for(simulator) as client:
        shared, denied = await send_many(client, 2)
        simulator.script_for(shared, Script(location="shared", location_pending_polls=2))
        simulator.script_for(denied, Script(location="denied", location_pending_polls=0))
        async with client.poll_locations([shared, denied], policy=policy) as outcomes:
            by_id = {outcome.request_id: outcome async for outcome in outcomes}
    assert by_id[shared].status is vc.PollStatus.LOCATED
    assert by_id[shared].attempts == 3
    assert isinstance(by_id[shared].result, vc.LocationResult)
    assert by_id[shared].result.location is not None
    assert by_id[denied].status is vc.PollStatus.TIMED_OUT
    assert by_id[denied].result is not None
    assert by_id[denied].result.pending


@pytest.mark.anyio
async def test_a_fault_fails_at_once_without_further_polls() -> None:
    simulator = Simulator(credentials=("user", "right"))
    async with (
        client_for(simulator, username="user", password="wrong") as client,
        client.poll_verifications([2**40, 2**41], policy=FAST) as outcomes,
    ):
        settled = [outcome async for outcome in outcomes]
    assert [outcome.status for outcome in settled] == [vc.PollStatus.FAILED] * 2
    assert all(isinstance(outcome.error, vc.AuthenticationError) for outcome in settled)
    assert len(simulator.calls(VERIFIED)) == 2


@pytest.mark.anyio
async def test_503s_and_dropped_connections_are_retried_within_a_poll() -> None:
    simulator = Simulator(config=SimulatorConfig(fail_503=0.2, drop=0.1, seed=11))
    policy = vc.PollPolicy(initial_delay=0, max_delay=0, timeout=30, retry=FAST_RETRY)
    async with client_for(simulator, retry=FAST_RETRY) as client:
        ids = []
        while len(ids) < 40:  # a send answered 503 or dropped is (rightly) not resent
            try:
                ids += await send_many(client, 1)
            except (vc.HTTPStatusError, vc.DeliveryUnknownError):
                continue
        async with client.poll_verifications(ids, policy=policy) as outcomes:
            settled = [outcome async for outcome in outcomes]
    assert {outcome.status for outcome in settled} == {vc.PollStatus.VERIFIED}
    logged = simulator.calls(VERIFIED)
    assert any(call.dropped for call in logged)
    assert any(call.status == 503 for call in logged)


@pytest.mark.anyio
async def test_ids_can_be_added_while_polling_runs() -> None:
    simulator = Simulator()
    async with client_for(simulator) as client:
        first, second, third = await send_many(client, 3)
        seen = []
        async with client.poll_verifications([first], policy=FAST, keep_open=True) as outcomes:
            outcomes.add(second)
            async for outcome in outcomes:
                seen.append(outcome.request_id)
                if len(seen) == 1:
                    outcomes.add(third)
                    outcomes.close_input()
    assert sorted(seen) == sorted([first, second, third])


@pytest.mark.anyio
async def test_an_id_added_with_its_first_poll_due_now_is_polled_now() -> None:
    # The policy's own first delay is an hour: only the override lets the
    # poll go (the bound ends the test if it does not).
    hour = vc.PollPolicy(initial_delay=3600, max_delay=3600, jitter=0, timeout=7200)
    simulator = Simulator(config=SimulatorConfig(script=Script(pending_polls=0)))
    async with client_for(simulator) as client:
        (request_id,) = await send_many(client, 1)
        with anyio.fail_after(30):
            async with client.poll_verifications([], policy=hour, keep_open=True) as outcomes:
                outcomes.add(request_id, first_poll_in=0)
                outcomes.close_input()
                settled = [outcome async for outcome in outcomes]
    assert [(o.request_id, o.status) for o in settled] == [(request_id, vc.PollStatus.VERIFIED)]


@pytest.mark.anyio
@pytest.mark.parametrize("first_poll_in", [-1.0, float("nan")])
async def test_a_first_poll_in_the_past_or_not_a_number_is_refused(first_poll_in: float) -> None:
    async with (
        client_for(Simulator()) as client,
        client.poll_verifications([], policy=FAST, keep_open=True) as outcomes,
    ):
        with pytest.raises(ValueError, match="first_poll_in"):
            outcomes.add(1, first_poll_in=first_poll_in)
        outcomes.close_input()


@pytest.mark.anyio
async def test_ids_can_come_from_a_queue() -> None:
    simulator = Simulator()
    async with client_for(simulator) as client:
        ids = await send_many(client, 20)
        send, receive = anyio.create_memory_object_stream[int](0)

        async def feed() -> None:
            async with send:
                for request_id in ids:
                    await send.send(request_id)

        async with anyio.create_task_group() as tg:
            tg.start_soon(feed)
            async with client.poll_verifications(receive, policy=FAST) as outcomes:
                seen = [outcome.request_id async for outcome in outcomes]
    assert sorted(seen) == sorted(ids)


@pytest.mark.anyio
async def test_both_kinds_give_one_outcome_each_per_id() -> None:
    simulator = Simulator()
    async with client_for(simulator) as client:
        ids = await send_many(client, 10)
        async with client.poll_verifications_and_locations(ids, policy=FAST) as outcomes:
            settled = [outcome async for outcome in outcomes]
    kinds: dict[int, list[str]] = defaultdict(list)
    for outcome in settled:
        kinds[outcome.request_id].append(type(outcome).__name__)
    assert {tuple(sorted(names)) for names in kinds.values()} == {
        ("LocationOutcome", "VerificationOutcome")
    }
    assert len(kinds) == 10


@pytest.mark.anyio
async def test_leaving_early_cancels_everything_and_leaves_no_task() -> None:
    simulator = Simulator(config=SimulatorConfig(script=Script(answer="never"), latency=0.001))
    busy = anyio.Event()

    async def counting(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if len(simulator.calls(VERIFIED)) >= 600:
            busy.set()
        await simulator(scope, receive, send)

    slow = vc.PollPolicy(initial_delay=0, max_delay=0.001, timeout=60)
    tasks_before = _running_tasks()
    async with client_for(counting) as client:
        ids = await send_many(client, 300)
        with anyio.fail_after(30):
            async with client.poll_verifications(ids, policy=slow, max_concurrency=50):
                await busy.wait()
        at_exit = len(simulator.calls(VERIFIED))
        for _ in range(200):
            await anyio.lowlevel.checkpoint()
        # Nothing polls any more once the block is left.
        assert len(simulator.calls(VERIFIED)) == at_exit
    assert _running_tasks() <= tasks_before


@pytest.mark.anyio
async def test_an_empty_poll_ends_at_once() -> None:
    async with (
        client_for(Simulator()) as client,
        client.poll_verifications([], policy=FAST) as outcomes,
    ):
        assert [outcome async for outcome in outcomes] == []


def _running_tasks() -> int:
    if sniffio.current_async_library() == "trio":

        def count(task: trio.lowlevel.Task) -> int:
            children = (child for nursery in task.child_nurseries for child in nursery.child_tasks)
            return 1 + sum(count(child) for child in children)

        return count(trio.lowlevel.current_root_task())
    return len(asyncio.all_tasks())


@pytest.mark.parametrize("attempt", range(1, 12))
def test_delays_follow_the_policy_bounds(attempt: int) -> None:
    policy = vc.PollPolicy(initial_delay=1, multiplier=1.5, max_delay=15, jitter=0.5)
    ceiling = min(15, 1.5 ** (attempt - 1))
    rng = random.Random(attempt)
    delays = [policy.delay(attempt, rng) for _ in range(2000)]
    assert all(ceiling * 0.5 <= delay <= ceiling for delay in delays)
    assert max(delays) - min(delays) > ceiling * 0.4  # the jitter really spreads


def test_the_schedule_follows_the_policy_on_a_fake_clock() -> None:
    """On trio's autojump clock a ten-minute schedule runs instantly: check
    every gap between polls, the cap, the jitter range and the deadline cut."""
    policy = vc.PollPolicy(initial_delay=1, multiplier=2, max_delay=20, jitter=0.25, timeout=100)
    poll_times: dict[int, list[float]] = defaultdict(list)
    simulator = Simulator(config=SimulatorConfig(script=Script(answer="never")))

    async def timed(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if "HasBeenVerified" in scope["path"]:
            request_id = int(scope["query_string"].decode().split("=")[1])
            poll_times[request_id].append(anyio.current_time())
        await simulator(scope, receive, send)

    async def main() -> tuple[float, list[vc.VerificationOutcome | vc.LocationOutcome]]:
        async with client_for(timed, binding="http-get") as client:
            ids = await send_many(client, 5)
            started = anyio.current_time()
            async with client.poll_verifications(ids, policy=policy) as outcomes:
                return started, [outcome async for outcome in outcomes]

    clock = trio.testing.MockClock(autojump_threshold=0)
    started, settled = anyio.run(main, backend="trio", backend_options={"clock": clock})
    assert {outcome.status for outcome in settled} == {vc.PollStatus.TIMED_OUT}
    for outcome in settled:
        times = poll_times[outcome.request_id]
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert 0.75 - 1e-6 <= times[0] - started <= 1 + 1e-6  # the first delay
        for number, gap in enumerate(gaps[:-1], start=2):
            ceiling = min(20, 2 ** (number - 1))
            assert ceiling * 0.75 - 1e-6 <= gap <= ceiling + 1e-6, (number, gap)
        assert gaps[-1] <= 20 + 1e-6  # the last delay, cut short by the deadline
        assert times[-1] - started == pytest.approx(100, abs=1e-6)  # lands on the deadline
        assert len(gaps) >= 7  # far enough that the cap (2**5 > 20) held for several polls
        assert outcome.attempts == len(times)
        assert outcome.elapsed == pytest.approx(100, abs=0.01)


@pytest.mark.parametrize("poll_number", [2000, 10**6])
def test_a_request_pending_for_very_many_polls_keeps_the_capped_delay(poll_number: int) -> None:
    assert 7.5 <= vc.PollPolicy().delay(poll_number) <= 15
    assert vc.PollPolicy(initial_delay=0).delay(poll_number) == 0
    assert 0 <= vc.RetryPolicy().backoff(poll_number) <= 4


@pytest.mark.parametrize("kind", [0, 1])
def test_a_kinds_outcome_is_what_its_class_makes(kind: int) -> None:
    from verif_client._polling import BOTH

    poll_kind = BOTH[kind]
    cls = (vc.VerificationOutcome, vc.LocationOutcome)[kind]
    error = vc.VerifClientError("no")
    made = poll_kind.outcome(7, vc.PollStatus.FAILED, None, error, 3, 1.5)
    expected = cls(7, vc.PollStatus.FAILED, None, error, 3, 1.5)
    assert type(made) is cls
    assert (made, hash(made), repr(made)) == (expected, hash(expected), repr(expected))


def holding_polls(hold: trio.Event, polled: list[int], *, first_only: bool) -> Any:
    """The simulator, answering a poll only once ``hold`` is set (only the
    first poll, with ``first_only``), each poll's id noted in ``polled``."""
    simulator = Simulator(config=SimulatorConfig(script=Script(pending_polls=0)))

    async def held(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if "HasBeenVerified" in scope["path"]:
            polled.append(int(scope["query_string"].decode().split("=")[1]))
            if not first_only or len(polled) == 1:
                await hold.wait()
        await simulator(scope, receive, send)

    return held


def test_due_counts_the_polls_that_wait_for_a_free_connection() -> None:
    """On trio's mock clock, one connection held by a poll the service has
    not answered: ids due meanwhile wait, and are counted; ids between polls
    (or before their first) are not."""
    hold = trio.Event()
    polled: list[int] = []
    held = holding_polls(hold, polled, first_only=True)

    hour = vc.PollPolicy(initial_delay=3600, max_delay=3600, jitter=0, timeout=7200)
    due: dict[str, int] = {}

    async def main() -> None:
        async with client_for(held, binding="http-get") as client:
            *now, later = await send_many(client, 4)
            async with client.poll_verifications(
                [], policy=hour, keep_open=True, max_concurrency=1
            ) as outcomes:
                outcomes.add(later)  # first poll in an hour
                for request_id in now:
                    outcomes.add(request_id, first_poll_in=0)
                await trio.testing.wait_all_tasks_blocked()
                due["one polled, two waiting"] = outcomes.due
                hold.set()
                settled = set()
                async for outcome in outcomes:
                    settled.add(outcome.request_id)
                    if settled == set(now):
                        break
                await trio.testing.wait_all_tasks_blocked()  # the dispatcher, too
                due["all polled"] = outcomes.due
                due["waiting, all of them"] = outcomes.waiting

    anyio.run(main, backend="trio", backend_options={"clock": trio.testing.MockClock()})
    assert len(polled) == 3
    assert due == {"one polled, two waiting": 2, "all polled": 0, "waiting, all of them": 1}


def test_due_counts_every_due_poll_wherever_the_heap_keeps_it() -> None:
    """Two hundred ids whose first polls fall due at mixed times, behind one
    held connection: ``due`` counts exactly those whose time has come, however
    the heap has ordered them."""
    hold = trio.Event()
    polled: list[int] = []
    held = holding_polls(hold, polled, first_only=False)

    hour = vc.PollPolicy(initial_delay=3600, max_delay=3600, jitter=0, timeout=7200)
    clock = trio.testing.MockClock()
    rng = random.Random(41)
    firsts = [0.0] + [rng.choice([1.0, 2.0, 3.0, 50.0, 100.0]) for _ in range(199)]
    seen: dict[float, int] = {}

    async def main() -> None:
        async with client_for(held, binding="http-get") as client:
            ids = await send_many(client, len(firsts))
            async with client.poll_verifications(
                [], policy=hour, keep_open=True, max_concurrency=1
            ) as outcomes:
                for request_id, first in zip(ids, firsts, strict=True):
                    outcomes.add(request_id, first_poll_in=first)
                await trio.testing.wait_all_tasks_blocked()
                for moment in (0.0, 1.5, 2.5, 3.5):
                    clock.jump(moment - trio.current_time())
                    await trio.testing.wait_all_tasks_blocked()
                    seen[moment] = outcomes.due
                seen[-1.0] = len(polled)
                hold.set()

    anyio.run(main, backend="trio", backend_options={"clock": clock})
    assert seen.pop(-1.0) == 1  # the one connection stayed held throughout
    # Every id due by then, but the one being polled.
    assert seen == {moment: sum(first <= moment for first in firsts) - 1 for moment in seen}
