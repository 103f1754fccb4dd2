"""Fault soak: a bulk job and a poll run against a simulator that fails often.

10% of calls answer 503, 5% of connections drop after the request is read and
every call waits a jittered moment. Every row and every id must end with
exactly one outcome, and no phone number may be texted twice -- also when the
server is stopped and started again on the same port in the middle of the run.

`nox -s tests` runs a small size; `nox -s soak` (marker ``soak``) runs the full
one: 2,000 numbers and 5,000 ids, scaled by ``VERIF_SOAK_SCALE``.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
import sniffio
from relsupport import PASSWORD, USER

import verif_client as vc
from verif_client.bulk._input import load_input
from verif_client.bulk._job import BulkOptions
from verif_client.bulk._open import open_journal
from verif_client.bulk._runner import run_bulk
from verif_client.simulator import Script, Simulator, SimulatorConfig, serve_in_thread

pytestmark = pytest.mark.anyio

SEND = "SecureLink_Confirmation_SendRequestViaSms"
VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"
SCALE = float(os.environ.get("VERIF_SOAK_SCALE", "1"))
# Calls retry until the deadline, not for a count of attempts: ten quick
# attempts last a few milliseconds, less than a restart of the server takes on
# a loaded machine, and the calls caught by it would fail for want of patience.
RETRY = vc.RetryPolicy(attempts=10_000, initial_backoff=0.001, max_backoff=0.01, deadline=30)
POLICY = vc.PollPolicy(initial_delay=0.005, max_delay=0.02, timeout=60, retry=RETRY)


def faulty(seed: int) -> Simulator:
    config = SimulatorConfig(
        fail_503=0.10,
        drop=0.05,
        latency=0.0,
        jitter=0.002,
        seed=seed,
        script=Script(pending_polls=1, location_pending_polls=1),
    )
    return Simulator(credentials=(USER, PASSWORD), config=config)


def sizes(soak: bool) -> tuple[int, int]:
    """(bulk rows, poll ids)."""
    if soak:
        return int(2000 * SCALE), int(5000 * SCALE)
    return 150, 300


@asynccontextmanager
async def restarting(
    simulator: Simulator, restart_when: Callable[[], bool] | None
) -> AsyncIterator[str]:
    """Serve ``simulator``; once ``restart_when()`` holds, stop the server and
    serve the same simulator again on the same port.

    The server runs in a thread of its own, on the other backend than the
    test's: stopping an asyncio listener while connections arrive trips a
    CPython 3.11 bug (``InvalidStateError`` in ``_sock_accept``) that the
    test's asyncio loop would report as the test's failure, and a trio portal
    cannot be started from inside a trio test run.
    """
    backend = "asyncio" if sniffio.current_async_library() == "trio" else "trio"
    first = serve_in_thread(simulator, backend=backend)
    server = first.__enter__()
    current = [first]
    restarted = False
    try:
        async with anyio.create_task_group() as tg:
            if restart_when is not None:

                async def restart() -> None:
                    nonlocal restarted
                    while not restart_when():  # noqa: ASYNC110 (another thread's state)
                        await anyio.sleep(0.001)
                    await anyio.to_thread.run_sync(first.__exit__, None, None, None)
                    current.clear()
                    again = serve_in_thread(simulator, port=server.port, backend=backend)
                    await anyio.to_thread.run_sync(again.__enter__)
                    current.append(again)
                    restarted = True

                tg.start_soon(restart)
            yield server.base_url
            tg.cancel_scope.cancel()
    finally:
        for context in current:
            await anyio.to_thread.run_sync(context.__exit__, None, None, None)
    assert restarted or restart_when is None, "the server was never restarted"


def report(title: str, simulator: Simulator, outcomes: Counter[str], **figures: int) -> None:
    log = simulator.requests
    faults = Counter("503" if r.status == 503 else "drop" for r in log if r.status != 200)
    print(
        f"\n[soak] {title}: requests={len(log)} faults_503={faults['503']} "
        f"faults_dropped={faults['drop']} outcomes={dict(sorted(outcomes.items()))} "
        + " ".join(f"{name}={value}" for name, value in figures.items())
    )


async def bulk_soak(tmp_path: Path, rows: int, *, restart: bool) -> None:
    simulator = faulty(seed=rows)
    phones = [f"512{n:07d}" for n in range(rows)]
    data = ("phone_number,id\n" + "".join(f"{p},u{i}\n" for i, p in enumerate(phones))).encode()
    journal = open_journal(str(tmp_path / "job.journal"))
    output = tmp_path / "out.jsonl"
    options = BulkOptions(question="Is this you?", deadline=60, concurrency=10, policy=POLICY)
    sends = lambda: len(simulator.calls(SEND))  # noqa: E731
    async with restarting(simulator, (lambda: sends() >= rows // 2) if restart else None) as url:
        client = vc.VerificationClient(
            url, username=USER, password=PASSWORD, retry=RETRY, max_connections=10, timeout=5
        )
        load_input(journal, data, options, client.binding)
        with anyio.fail_after(120):
            async with client:
                counts = await run_bulk(client, journal, str(output), options)
    journal.close()

    lines = [json.loads(line) for line in output.read_text().splitlines()]
    by_line = Counter(row["line"] for row in lines)
    duplicates = sum(n - 1 for n in by_line.values())
    lost = rows - len(by_line)
    texted = Counter(call.params["PhoneNumber"] for call in simulator.calls(SEND))
    resent = sum(n - 1 for n in texted.values())
    outcomes = Counter(row["status"] for row in lines)
    title = "bulk with restart" if restart else "bulk"
    report(title, simulator, outcomes, rows=rows, duplicates=duplicates, lost=lost, resent=resent)

    assert sorted(by_line) == list(range(2, rows + 2))
    assert duplicates == lost == resent == 0
    assert sum(counts[s] for s in ("queued", "sending", "sent")) == 0
    # The faults really happened and were survived.
    assert outcomes["verified"] > rows // 2
    assert outcomes["unknown"] > 0  # dropped SMS calls: reported, not resent
    assert set(outcomes) <= {"verified", "failed", "unknown"}


async def poll_soak(ids: int, *, restart: bool) -> None:
    simulator = faulty(seed=ids)
    polls = lambda: len(simulator.calls(VERIFIED))  # noqa: E731
    async with restarting(simulator, (lambda: polls() >= ids) if restart else None) as url:
        # Ids the service knows, made directly in its state (faults only apply on the wire).
        state = simulator._state
        known = [state.send_confirmation_sms("5125550100", "Q?").request_id for _ in range(ids)]
        seen: Counter[int] = Counter()
        statuses: Counter[str] = Counter()
        with anyio.fail_after(120):
            async with (
                vc.VerificationClient(
                    url,
                    username=USER,
                    password=PASSWORD,
                    retry=RETRY,
                    max_connections=10,
                    timeout=5,
                ) as client,
                client.poll_verifications(known, policy=POLICY, max_concurrency=10) as outcomes,
            ):
                async for outcome in outcomes:
                    seen[outcome.request_id] += 1
                    statuses[outcome.status.value] += 1
    duplicates = sum(n - 1 for n in seen.values())
    lost = len(set(known) - set(seen))
    title = "poll with restart" if restart else "poll"
    report(title, simulator, statuses, ids=ids, duplicates=duplicates, lost=lost)
    assert set(seen) == set(known)
    assert duplicates == lost == 0
    assert statuses["verified"] > ids * 0.9


@pytest.mark.parametrize("restart", [False, True], ids=["steady", "restart"])
async def test_bulk_soak(tmp_path: Path, restart: bool) -> None:
    await bulk_soak(tmp_path, sizes(False)[0], restart=restart)


@pytest.mark.parametrize("restart", [False, True], ids=["steady", "restart"])
async def test_poll_soak(restart: bool) -> None:
    await poll_soak(sizes(False)[1], restart=restart)


@pytest.mark.soak
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("restart", [False, True], ids=["steady", "restart"])
async def test_bulk_soak_full(tmp_path: Path, restart: bool) -> None:
    await bulk_soak(tmp_path, sizes(True)[0], restart=restart)


@pytest.mark.soak
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("restart", [False, True], ids=["steady", "restart"])
async def test_poll_soak_full(restart: bool) -> None:
    await poll_soak(sizes(True)[1], restart=restart)
