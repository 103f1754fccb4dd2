"""Instructions per poll under callgrind: a deterministic figure for A/B decisions.

Wall-clock and CPU-time figures move with whatever else runs on a shared
machine; instruction counts do not. ``python -m benchmarks.instructions``
runs ``poll_verifications`` against the 50 ms ``latency_server`` (its own
process, not under valgrind) with ``POOL`` connections, twice under
``valgrind --tool=callgrind``: once with ``WARM * POOL`` ids (the pool
opened, 32 connections at a time, and warm) and once with ``WARM * POOL +
EXTRA`` ids. The difference over ``EXTRA`` is what one more poll costs on a
warm connection, the intake of its id included, start-up and connecting
excluded: the last column says how many connections each run opened, and
a figure whose two runs opened different numbers counts connecting too
(under callgrind a pool of thousands opened by anyio, uvloop's way for a
host name, may not be whole after the warm polls). Needs valgrind on PATH.

``python -m benchmarks.instructions --pools 1024,4096 --extra 2048 --warm 6 --loop asyncio``
(``--host localhost``: the server named, as a service is, not by its address.)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import ROOT, run_on


def _child(loop: str, pool: int, count: int, base_url: str) -> None:

    from verif_client import PollPolicy, PollStatus, RetryPolicy, VerificationClient
    from verif_client._transport._pool import ConnectionPool

    from . import workload

    # Connections opened, told to the parent: a run that opens more than the
    # other counts connecting in what it calls a poll's cost.
    opened = 0
    connect = ConnectionPool._connect

    async def counted(pool: ConnectionPool) -> Any:
        nonlocal opened
        opened += 1
        return await connect(pool)

    ConnectionPool._connect = counted  # type: ignore[method-assign, assignment]

    # Under valgrind, opening thousands of connections is slow: no deadline short of 10 minutes.
    patient = RetryPolicy(deadline=600)
    zero = PollPolicy(initial_delay=0, max_delay=0, jitter=0, timeout=600, retry=patient)

    async def main() -> None:
        verified = 0
        failure = None
        async with (
            VerificationClient(
                base_url,
                username=workload.USERNAME,
                password=workload.PASSWORD,
                max_connections=pool,
                # Under valgrind, opening thousands of connections is slow.
                timeout=600,
            ) as client,
            client.poll_verifications(
                range(10**9, 10**9 + count), policy=zero, max_concurrency=pool
            ) as outcomes,
        ):
            async for outcome in outcomes:
                verified += outcome.status is PollStatus.VERIFIED
                failure = failure or outcome.error
        if verified != count:
            raise SystemExit(f"{count - verified} of {count} polls not VERIFIED: {failure}")

    run_on(loop, main)
    print(f"connections opened: {opened}", file=sys.stderr)


def instructions(loop: str, pool: int, count: int, base_url: str) -> tuple[int, int]:
    """Instructions the client process ran, start-up to exit, under
    callgrind, and the connections it opened."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={Path(tmp) / 'out'}",
                sys.executable,
                "-m",
                "benchmarks.instructions",
                "--child",
                loop,
                str(pool),
                str(count),
                base_url,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no callgrind total in:\n{done.stderr[-2000:]}")
    opened = re.search(r"connections opened: (\d+)", done.stderr)
    return int(found.group(1)), int(opened.group(1)) if opened else -1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__)
    parser.add_argument("--pools", default="1024,4096", help="comma-separated pool sizes")
    parser.add_argument("--extra", type=int, default=2048, help="polls measured on warm pools")
    parser.add_argument("--warm", type=int, default=6, help="polls before, in pools' worth")
    parser.add_argument("--loop", default="asyncio", choices=("asyncio", "uvloop"))
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="the name the client gives the server (localhost: a name to resolve)",
    )
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        loop, pool, count, base_url = args.child
        _child(loop, int(pool), int(count), base_url)
        return 0
    from . import latency_server

    print(
        f"| connections | loop | instructions per poll (callgrind, {args.extra:,} polls) "
        "| connections opened, the two runs |"
    )
    print("|---:|---|---:|---|")
    with latency_server.running(50, cpu=0) as info:
        base_url = info["base_url"].replace("127.0.0.1", args.host)
        for pool in (int(p) for p in args.pools.split(",")):
            # Both runs first make --warm times pool polls: the pool opens its
            # connections 32 at a time while answers already come back, and
            # under callgrind a connection takes as long to open as several
            # polls take, so the pool is whole only after several rounds.
            warm = pool * args.warm
            base, opened_base = instructions(args.loop, pool, warm, base_url)
            more, opened_more = instructions(args.loop, pool, warm + args.extra, base_url)
            per_poll = (more - base) / args.extra
            # Unequal counts: the pool was not whole after the warm polls (under
            # callgrind connecting is slow), and connecting counts in the figure.
            flag = "" if opened_base == opened_more else " (**not comparable**)"
            print(
                f"| {pool:,} | {args.loop} {args.host} | {per_poll:,.0f} "
                f"| {opened_base:,} / {opened_more:,}{flag} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
