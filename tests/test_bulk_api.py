"""``verif_client.bulk``: a job from Python, on asyncio and trio."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import verif_client as vc
from verif_client import bulk
from verif_client.simulator import Script, Simulator, SimulatorConfig

pytestmark = pytest.mark.anyio

FAST = vc.PollPolicy(initial_delay=0.02, max_delay=0.1, false_means="final")
OPTIONS = bulk.BulkOptions(question="Pay?", concurrency=5, deadline=5, policy=FAST)


@pytest.fixture
async def client() -> AsyncIterator[vc.VerificationClient]:
    simulator = Simulator(config=SimulatorConfig(script=Script(pending_polls=1)))
    async with vc.VerificationClient(
        "http://simulator",
        transport=httpx.ASGITransport(app=simulator),
        binding=vc.Binding.HTTP_GET,
    ) as client:
        yield client


async def test_a_job_runs_to_its_end_and_counts_rows_by_state(
    client: vc.VerificationClient, tmp_path: Path
) -> None:
    data = b"phone_number\n5550001111\n5550002222\n555-3\nPay <me>?\n"
    counts = await bulk.run_job(
        client,
        journal=str(tmp_path / "job.sqlite"),
        output=str(tmp_path / "out.jsonl"),
        data=data,
        options=OPTIONS,
    )
    assert counts[bulk.RowState.VERIFIED] == 2
    assert counts[bulk.RowState.INVALID] == 2
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert {row["status"] for row in rows} == {"verified", "invalid"}


async def test_input_is_checked_with_the_clients_own_codec(
    client: vc.VerificationClient, tmp_path: Path
) -> None:
    # The client sends by HTTP GET, where ASP.NET refuses markup in a question.
    data = b"phone_number,question\n5550001111,Pay <ACME>?\n5550002222,Pay?\n"
    counts = await bulk.run_job(
        client,
        journal=str(tmp_path / "job.sqlite"),
        output=str(tmp_path / "out.jsonl"),
        data=data,
        options=bulk.BulkOptions(concurrency=5, deadline=5, policy=FAST),
    )
    assert counts[bulk.RowState.INVALID] == 1
    assert counts[bulk.RowState.VERIFIED] == 1


async def test_bad_input_raises_before_anything_is_created(
    client: vc.VerificationClient, tmp_path: Path
) -> None:
    with pytest.raises(bulk.BulkInputError, match="phone_number") as caught:
        await bulk.run_job(
            client,
            journal=str(tmp_path / "job.sqlite"),
            output=str(tmp_path / "out.jsonl"),
            data=b"number\n5550001111\n",
            options=OPTIONS,
        )
    assert isinstance(caught.value, vc.VerifClientError)
    assert [path async for path in anyio.Path(tmp_path).iterdir()] == []


async def test_a_stop_requested_up_front_sends_nothing_and_a_later_run_finishes(
    client: vc.VerificationClient, tmp_path: Path
) -> None:
    stopper = bulk.Stopper()
    stopper.request()
    where = {"journal": str(tmp_path / "job.sqlite"), "output": str(tmp_path / "out.jsonl")}
    data = b"phone_number\n5550001111\n5550002222\n"
    counts = await bulk.run_job(client, **where, data=data, options=OPTIONS, stopper=stopper)
    assert counts[bulk.RowState.QUEUED] == 2
    counts = await bulk.run_job(client, **where, options=OPTIONS)
    assert counts[bulk.RowState.VERIFIED] == 2


async def test_a_row_changed_behind_the_runs_back_stops_it_with_a_journal_error(
    tmp_path: Path,
) -> None:
    simulator = Simulator(config=SimulatorConfig(script=Script(pending_polls=1)))
    journal = tmp_path / "job.sqlite"

    async def meddling(scope: Any, receive: Any, send: Any) -> None:
        # At the first SMS, another writer marks every queued row invalid: the
        # run's next queued -> sending must find the row changed, and stop.
        with sqlite3.connect(journal) as db:
            db.execute("UPDATE rows SET state = 'invalid' WHERE state = 'queued'")
        await simulator(scope, receive, send)

    async with vc.VerificationClient(
        "http://simulator",
        transport=httpx.ASGITransport(app=meddling),
        binding=vc.Binding.HTTP_GET,
        rate_limit=1,  # the second send waits a second for its slot, long after the first
    ) as client:
        with pytest.raises(bulk.JournalError, match=r"line 3 is invalid, expected queued"):
            await bulk.run_job(
                client,
                journal=str(journal),
                output=str(tmp_path / "out.jsonl"),
                data=b"phone_number\n5550001111\n5550002222\n",
                options=OPTIONS,
            )
