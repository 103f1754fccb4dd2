"""How much of a poll's CPU goes to Python's cyclic garbage collector.

``python -m benchmarks.gcshare --pools 1024,4096 --loop asyncio`` runs
``poll_verifications`` against the 50 ms ``latency_server`` (its own process,
CPU 0; the client on CPU 1), waits until every connection has answered twice,
then for a few seconds times each collection with ``gc.callbacks`` and prints
the collector's time per poll beside the poll's whole CPU time. The
collector's passes walk every live container object, so their cost grows
with the connections and the polls in flight: the part of CPU per poll that
grows with the pool.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Sequence
from typing import Any

from . import latency_server, perpoll
from .common import run_on


def measure(base_url: str, pool: int, loop: str, window: float) -> dict[str, Any]:
    latency_server.pin(1)
    timings: dict[int, list[float]] = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
    began = [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = time.process_time()
        else:
            entry = timings[info["generation"]]
            entry[0] += 1
            entry[1] += time.process_time() - began[0]

    async def main() -> dict[str, Any]:
        stats = perpoll.Stats(0)
        contender = perpoll.CONTENDERS[perpoll.CLIENT][0]
        ids = range(perpoll.FIRST_ID, perpoll.FIRST_ID + 10**7)
        task = asyncio.ensure_future(contender(base_url, pool, ids, stats))
        for _ in range(600):
            if stats.done >= 2 * pool:
                break
            await asyncio.sleep(0.1)
        done, cpu = stats.done, time.process_time()
        gc.callbacks.append(timed)
        await asyncio.sleep(window)
        gc.callbacks.remove(timed)
        polls, cpu = stats.done - done, time.process_time() - cpu
        task.cancel()
        return {
            "polls": polls,
            "cpu_us": cpu / polls * 1e6,
            "gc_us": sum(entry[1] for entry in timings.values()) / polls * 1e6,
            "collections": [int(timings[g][0]) for g in (0, 1, 2)],
            "tracked": len(gc.get_objects()),
        }

    return run_on(loop, main)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gcshare", description=__doc__)
    parser.add_argument("--pools", default="1024,4096", help="comma-separated pool sizes")
    parser.add_argument("--loop", default="asyncio", choices=("asyncio", "uvloop"))
    parser.add_argument("--window", type=float, default=3.0, help="seconds measured")
    args = parser.parse_args(argv)
    print(
        "| connections | loop | CPU µs/poll | of which the collector | collections (gen 0/1/2) "
        "| tracked objects |"
    )
    print("|---:|---|---:|---:|---|---:|")
    with latency_server.running(perpoll.LATENCY_MS, cpu=0, loop="uvloop") as info:
        for pool in (int(p) for p in args.pools.split(",")):
            got = measure(info["base_url"], pool, args.loop, args.window)
            share = got["gc_us"] / got["cpu_us"]
            print(
                f"| {pool:,} | {args.loop} | {got['cpu_us']:.0f} | {got['gc_us']:.0f} "
                f"({share:.0%}) | {'/'.join(map(str, got['collections']))} "
                f"| {got['tracked']:,} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
