"""Sections 2 and 3: polling throughput in process (MockTransport) and over
loopback sockets (the simulator in another process), all contenders side by
side, their order rotated between repeats so a busy machine hurts all alike.

Polls per second are counted two ways: per second of wall time, and per
second of this process's CPU time. In process the two agree on an idle
machine; on a shared one the CPU figure is the steadier measure of cost.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from . import server, workload
from .common import Report, Settings
from .pollers import CONTENDERS

CONCURRENCY = 200


# Each library with its own default pool (verif_client 100 connections, httpx 100),
# 200 requests wanted in flight. The extra loopback rows give verif_client pools of
# 200, 8 and 50 connections: its own pool's cost per request does not grow with its
# size (httpx's did: it rescans every connection on each request).
IN_PROCESS: dict[str, tuple[str, dict[str, Any]]] = {name: (name, {}) for name in CONTENDERS}
LOOPBACK = {
    **IN_PROCESS,
    "verif_client, max_connections=200": ("verif_client", {"connections": 200}),
    "verif_client, max_connections=8": ("verif_client", {"connections": 8}),
    "verif_client, max_connections=50": ("verif_client", {"connections": 50}),
}


def _rotations(names: list[str], repeats: int) -> Iterator[list[str]]:
    for repeat in range(repeats):
        shift = repeat % len(names)
        yield names[shift:] + names[:shift]


async def _timed(
    variant: tuple[str, dict[str, Any]], ids: list[int], **kwargs: Any
) -> tuple[float, float]:
    name, options = variant
    wall, cpu = time.perf_counter(), time.process_time()
    polls = await CONTENDERS[name](ids, concurrency=CONCURRENCY, **options, **kwargs)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert polls == len(ids) * workload.POLLS_TO_VERIFY, (name, polls)
    return polls / wall, polls / cpu


def _measure(
    variants: dict[str, tuple[str, dict[str, Any]]],
    repeats: int,
    count: int,
    run_one: Callable[[tuple[str, dict[str, Any]], list[int]], tuple[float, float]],
) -> dict[str, dict[str, float]]:
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for variant in variants.values():  # warm-up: imports, WSDL parsing, first connections
        run_one(variant, list(range(1, 50)))
    for order in _rotations(list(variants), repeats):
        for name in order:
            samples[name].append(run_one(variants[name], list(range(count))))
    return {
        name: {
            "wall_polls_per_s": statistics.median(s[0] for s in runs),
            "cpu_polls_per_s": statistics.median(s[1] for s in runs),
        }
        for name, runs in samples.items()
    }


def in_process(settings: Settings) -> dict[str, dict[str, float]]:
    count = settings.scaled(2000, 200)
    with tempfile.TemporaryDirectory() as tmp:
        wsdl = workload.write_wsdl(Path(tmp))

        def run_one(variant: tuple[str, dict[str, Any]], ids: list[int]) -> tuple[float, float]:
            transport = httpx.MockTransport(workload.verify_on_nth_poll())
            return asyncio.run(
                _timed(variant, ids, base_url=workload.BASE_URL, transport=transport, wsdl=wsdl)
            )

        return _measure(IN_PROCESS, settings.scaled(settings.repeats, 1), count, run_one)


def loopback(settings: Settings) -> dict[str, dict[str, float]]:
    # Smaller than in process: loopback HTTP costs about 1 ms of CPU per request here.
    count = settings.scaled(400, 100)
    repeats = settings.scaled(3, 1)
    needed = (count * repeats + 49) * len(LOOPBACK)
    with server.running(needed) as info:
        next_id = info["first_id"]

        def run_one(variant: tuple[str, dict[str, Any]], ids: list[int]) -> tuple[float, float]:
            nonlocal next_id
            fresh = list(range(next_id, next_id + len(ids)))
            next_id += len(ids)
            return asyncio.run(
                _timed(variant, fresh, base_url=info["base_url"], wsdl=info["wsdl_url"])
            )

        return _measure(LOOPBACK, repeats, count, run_one)


def _rows(figures: dict[str, dict[str, float]]) -> list[list[str]]:
    zeep = figures["zeep"]
    return [
        [
            name,
            f"{f['wall_polls_per_s']:,.0f}",
            f"{f['cpu_polls_per_s']:,.0f}",
            f"{f['wall_polls_per_s'] / zeep['wall_polls_per_s']:.2f}x",
            f"{f['cpu_polls_per_s'] / zeep['cpu_polls_per_s']:.2f}x",
        ]
        for name, f in figures.items()
    ]


HEADER = ["client", "polls/s (wall)", "polls/CPU-s", "vs zeep (wall)", "vs zeep (CPU)"]


def _section(
    report: Report, key: str, title: str, figures: dict[str, dict[str, float]], note: str
) -> None:
    report.figures[key] = figures
    report.table(title, HEADER, _rows(figures), note)


def run(report: Report, settings: Settings) -> None:
    figures = in_process(settings)
    _section(
        report,
        "polling_in_process",
        "2. In-process polling (httpx.MockTransport), median",
        figures,
        f"{settings.scaled(2000, 200)} ids, each verified on its 5th poll, {CONCURRENCY} in "
        "flight, zero delays; SOAP 1.1.",
    )
    ours, zeep, hand = (figures[n]["cpu_polls_per_s"] for n in IN_PROCESS)
    report.target("in-process polling >= 3x zeep (CPU)", ours >= 3 * zeep, f"{ours / zeep:.2f}x")
    report.target(
        "in-process polling >= 90% of hand-written httpx+lxml (CPU)",
        ours >= 0.9 * hand,
        f"{ours / hand:.0%}",
    )

    figures = loopback(settings)
    _section(
        report,
        "polling_loopback",
        "3. Loopback polling (simulator on 127.0.0.1, own process), median",
        figures,
        f"{settings.scaled(400, 100)} ids, each verified on its 5th poll, {CONCURRENCY} "
        "in flight, over real sockets; the server is the simulator (h11) in a second process, "
        "so wall-clock figures include its cost on the other core.",
    )
    ours, zeep = figures["verif_client"]["wall_polls_per_s"], figures["zeep"]["wall_polls_per_s"]
    report.target("loopback polling >= 2.5x zeep (wall)", ours >= 2.5 * zeep, f"{ours / zeep:.2f}x")
