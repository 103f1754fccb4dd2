"""``verif-client demo``: a whole bulk job against the in-process simulator."""

from __future__ import annotations

import os
import random
import shlex
import tempfile
import time

import anyio
import httpx

from ._client import VerificationClient
from ._counts import print_counts
from ._pollpolicy import PollPolicy
from ._progress import ProgressDisplay
from ._service import Binding
from .bulk._input import load_input
from .bulk._job import BulkOptions
from .bulk._open import open_journal
from .bulk._runner import run_bulk

DEMO_QUESTION = "Did you ask to pay $25 to ACME & Co.?"
# Fast enough that the demo ends in seconds; real jobs use the defaults.
DEMO_POLICY = PollPolicy(
    initial_delay=0.05, multiplier=1.5, max_delay=0.4, jitter=0.5, false_means="final"
)
DEMO_DEADLINE = 4.0
NUMBERS, JOURNAL, RESULTS = "demo-numbers.csv", "demo-journal.sqlite", "demo-results.jsonl"


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
    # Kept with --keep, to run again against `verif-client simulate`.
    await anyio.Path(directory, NUMBERS).write_bytes(data)
    journal = open_journal(os.path.join(directory, JOURNAL))
    print(
        f"demo: {rows} numbers ({len(never)} never answer, {len(declined)} say no, "
        f"some invalid) against the in-process simulator, SOAP 1.1",
        flush=True,
    )
    try:
        load_input(journal, data, options, Binding.SOAP11)
        # Redrawn as a real job's is: four times a second on a terminal, every 5 s elsewhere.
        display = ProgressDisplay()
        async with VerificationClient(
            "http://simulator",
            username="demo",
            password="demo-password",
            transport=httpx.ASGITransport(app=simulator),
            max_connections=100,
        ) as client:
            output = os.path.join(directory, RESULTS)
            async with anyio.create_task_group() as tg:
                tg.start_soon(display.run)
                counts = await run_bulk(client, journal, output, options, display)
                tg.cancel_scope.cancel()
        display.close()
    finally:
        journal.close()
    print(f"\nrequests served by the simulator: {len(simulator.requests)}")
    return counts


def next_steps(keep: str | None) -> str:
    """Where the journal and results went, and what to try next."""
    directory = keep or "demo"
    journal = shlex.quote(os.path.join(directory, JOURNAL))
    if keep:
        lines = [
            f"journal: {journal} (the job's truth: every row's state)",
            f"results: {shlex.quote(os.path.join(directory, RESULTS))} (one JSON line per row)",
            f"numbers: {shlex.quote(os.path.join(directory, NUMBERS))} (the generated input)",
        ]
    else:
        lines = [
            "The journal and results were in a temporary directory, now removed; to keep them:",
            f"  verif-client demo --keep {shlex.quote(directory)}",
        ]
    numbers = shlex.quote(os.path.join(directory, NUMBERS))
    return "\n".join(
        [
            *lines,
            "Then try:",
            f"  verif-client bulk status --journal {journal}",
            f"  verif-client bulk export --journal {journal} --output results.jsonl",
            "  verif-client simulate --port 8765   # the simulator on a port; in another terminal:",
            f"  verif-client bulk run --base-url http://127.0.0.1:8765 --binding http-post "
            f"--input {numbers} --question 'Did you ask to pay?' --journal job.sqlite "
            "--output job.jsonl",
            "More: verif-client --help, and the documentation's Quick start.",
        ]
    )


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
    print(next_steps(keep))
    return 0
