"""``verif-client demo``: a whole bulk job against the in-process simulator."""

from __future__ import annotations

import os
import random
import tempfile
import time

import anyio
import httpx

from ._cli import print_counts
from ._client import VerificationClient
from ._pollpolicy import PollPolicy
from ._progress import ProgressDisplay
from ._service import Binding
from .bulk._input import load_input
from .bulk._job import BulkOptions
from .bulk._journal import open_journal
from .bulk._runner import run_bulk

DEMO_QUESTION = "Did you ask to pay $25 to ACME & Co.?"
# Fast enough that the demo ends in seconds; real jobs use the defaults.
DEMO_POLICY = PollPolicy(
    initial_delay=0.05, multiplier=1.5, max_delay=0.4, jitter=0.5, false_means="final"
)
DEMO_DEADLINE = 4.0


def synthetic_numbers(rows: int, rng: random.Random) -> tuple[bytes, list[str], list[str]]:
    """A CSV of ``rows`` numbers: a few invalid, a few that never answer, a few that say no."""
    lines = ["phone_number,id"]
    never: list[str] = []
    declined: list[str] = []
    for index in range(rows):
        number = f"555{index:07d}"
        if index % 97 == 13:
            number = f"555-{index:04d}"  # invalid: the service wants digits only
        elif index % 101 == 7:
            never.append(number)
        elif index % 53 == 5:
            declined.append(number)
        lines.append(f"{number},demo-{index}")
    rng.shuffle(lines[1:])
    return ("\n".join(lines) + "\n").encode(), never, declined


async def _demo(rows: int, directory: str) -> dict[str, int]:
    from .simulator import Script, Simulator, SimulatorConfig

    rng = random.Random(7)
    data, never, declined = synthetic_numbers(rows, rng)
    simulator = Simulator(
        credentials=("demo", "demo-password"),
        config=SimulatorConfig(script=Script(pending_polls=3, location_pending_polls=3)),
    )
    for number in never:
        simulator.script_for(number, Script(answer="never"))
    for number in declined:
        simulator.script_for(number, Script(answer="declined", pending_polls=1))
    options = BulkOptions(
        question=DEMO_QUESTION, concurrency=100, deadline=DEMO_DEADLINE, policy=DEMO_POLICY
    )
    journal = open_journal(os.path.join(directory, "demo-journal.sqlite"))
    print(
        f"demo: {rows} numbers ({len(never)} never answer, {len(declined)} say no, "
        f"some invalid) against the in-process simulator, SOAP 1.1",
        flush=True,
    )
    try:
        load_input(journal, data, options, Binding.SOAP11)
        display = ProgressDisplay(interval=0.5)
        async with VerificationClient(
            "http://simulator",
            username="demo",
            password="demo-password",
            transport=httpx.ASGITransport(app=simulator),
            max_connections=100,
        ) as client:
            output = os.path.join(directory, "demo-results.jsonl")
            async with anyio.create_task_group() as tg:
                tg.start_soon(display.run)
                counts = await run_bulk(client, journal, output, options, display)
                tg.cancel_scope.cancel()
        display.close()
    finally:
        journal.close()
    print(f"\nrequests served by the simulator: {len(simulator.requests)}")
    return counts


def run_demo(rows: int = 1000, keep: str | None = None) -> int:
    started = time.monotonic()
    if keep:
        os.makedirs(keep, exist_ok=True)
        counts = anyio.run(_demo, rows, keep)
    else:
        with tempfile.TemporaryDirectory() as directory:
            counts = anyio.run(_demo, rows, directory)
    print_counts(counts)
    print(f"finished in {time.monotonic() - started:.1f} s")
    return 0
