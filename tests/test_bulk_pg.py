"""``run_bulk`` over the PostgreSQL journal, in process, on asyncio and trio."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import anyio
import httpx
import pytest

from verif_client import Binding, PollPolicy, VerificationClient
from verif_client._bulk import BulkOptions, load_input, run_bulk
from verif_client._cli import main
from verif_client._journal import open_journal
from verif_client.simulator import Script, Simulator, SimulatorConfig

pytest.importorskip("psycopg")
pytestmark = pytest.mark.anyio

FAST = PollPolicy(initial_delay=0.02, max_delay=0.1, false_means="final")


async def test_two_workers_in_one_process_finish_every_row_once(
    postgres_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    simulator = Simulator(config=SimulatorConfig(script=Script(pending_polls=1)))
    data = ("phone_number\n" + "".join(f"555000{i:04d}\n" for i in range(60)) + "x\n").encode()
    options = BulkOptions(question="Pay?", concurrency=5, deadline=5, policy=FAST)
    # Long enough that no stall of a loaded machine makes a live worker look
    # dead (its rows in flight would turn "unknown"); no worker dies here.
    location = f"{postgres_db}?job=inproc&lease=5"
    journals = [open_journal(location) for _ in range(2)]
    counts: list[dict[str, int]] = []

    async def worker(index: int) -> None:
        journal = journals[index]
        await anyio.to_thread.run_sync(load_input, journal, data, options, Binding.SOAP11)
        async with VerificationClient(
            "http://simulator",
            transport=httpx.ASGITransport(app=simulator),
            rate_limiter=journal.rate_limiter(500),
        ) as client:
            output = str(tmp_path / f"out{index}.jsonl")
            counts.append(await run_bulk(client, journal, output, options))

    try:
        async with anyio.create_task_group() as tg:
            for index in range(2):
                tg.start_soon(worker, index)
    finally:
        for journal in journals:
            journal.close()

    assert counts[-1]["verified"] == 60
    assert counts[-1]["invalid"] == 1
    sends = collections.Counter(
        request.params["PhoneNumber"]
        for request in simulator.requests
        if request.operation == "SecureLink_Confirmation_SendRequestViaSms"
    )
    assert len(sends) == 60
    assert set(sends.values()) == {1}
    # The worker that finished last leaves an output as complete as the journal.
    outputs = [
        [json.loads(line)["line"] for line in (tmp_path / f"out{i}.jsonl").read_text().splitlines()]
        for i in range(2)
    ]
    assert max(len(set(lines)) for lines in outputs) == 61
    assert all(len(lines) == len(set(lines)) for lines in outputs)
    # `bulk status` counts the whole job, whichever worker finished each row.
    capsys.readouterr()
    assert main(["bulk", "status", "--journal", location]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"^verified\s+60$", printed, re.MULTILINE), printed
    assert re.search(r"^total\s+61$", printed, re.MULTILINE), printed
