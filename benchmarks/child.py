"""Measurements that need a fresh process: peak RSS, memory per id, start-up.

``python -m benchmarks.child KIND ARGS...`` prints one JSON object. Each kind
imports only what it measures, so one contender's imports never count
against another's memory or start-up time.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

# ruff: noqa: E402 -- the clock above must start before any import.
import json
import resource
import sys
from typing import Any


def _peak_rss_mib() -> float:
    """Peak RSS of this process since it started.

    ``getrusage(RUSAGE_SELF).ru_maxrss`` is the fallback only: Linux carries the
    high-water mark of the forked parent across exec, so a child of a 70 MiB
    benchmark run reports at least 70 MiB. ``VmHWM`` belongs to the exec'd image.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def scale(count: int, traced: bool) -> dict[str, Any]:
    """``count`` ids waiting at once, never verified, one poll each before the
    deadline. With ``traced`` the bytes per waiting id are counted by
    tracemalloc (whose own bookkeeping would distort the RSS, hence two runs)."""
    import tracemalloc

    import anyio
    import httpx

    from verif_client import PollPolicy, VerificationClient

    from . import workload

    handler = workload.verify_on_nth_poll(polls=10**9)
    policy = PollPolicy(initial_delay=1.0, max_delay=1.0, jitter=0.5, timeout=1.0)
    result: dict[str, Any] = {"rss_after_imports_mib": _peak_rss_mib()}

    async def main() -> None:
        async with VerificationClient(
            workload.BASE_URL, transport=httpx.MockTransport(handler)
        ) as client:
            stream_cm = client.poll_verifications([], policy=policy, keep_open=True)
            async with stream_cm as stream:
                await anyio.sleep(0.05)
                if traced:
                    tracemalloc.start()
                    before = tracemalloc.take_snapshot()
                for request_id in range(10**9, 10**9 + count):
                    stream.add(request_id)
                result["waiting"] = stream.waiting
                if traced:
                    after = tracemalloc.take_snapshot()
                    tracemalloc.stop()
                    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
                    result["bytes_per_waiting_id"] = grown / count
                stream.close_input()
                statuses: dict[str, int] = {}
                async for outcome in stream:
                    statuses[outcome.status.name] = statuses.get(outcome.status.name, 0) + 1
                result["outcomes"] = statuses

    anyio.run(main)
    result["peak_rss_mib"] = _peak_rss_mib()
    return result


def issue5(contender: str, count: int, wsdl_dir: str) -> dict[str, Any]:
    """``count`` ids against the in-process simulator, each verified on its 5th poll."""
    import asyncio
    from pathlib import Path

    import httpx

    from . import workload
    from .pollers import CONTENDERS

    simulator = workload.scripted_simulator()
    ids = workload.create_requests(simulator, count)
    wsdl = workload.write_wsdl(Path(wsdl_dir))

    async def main() -> dict[str, Any]:
        async def trim_log() -> None:
            # The simulator logs every request; that memory is not the client's.
            while True:
                await asyncio.sleep(0.25)
                simulator.reset_log()

        trimmer = asyncio.ensure_future(trim_log())
        wall, cpu = time.perf_counter(), time.process_time()
        polls = await CONTENDERS[contender](
            ids,
            base_url=workload.BASE_URL,
            concurrency=200,
            transport=httpx.ASGITransport(app=simulator),
            wsdl=wsdl,
        )
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        trimmer.cancel()
        assert polls == count * workload.POLLS_TO_VERIFY, polls
        return {"polls": polls, "wall_polls_per_s": polls / wall, "cpu_polls_per_s": polls / cpu}

    result = asyncio.run(main())
    result["peak_rss_mib"] = _peak_rss_mib()
    return result


def startup(contender: str, wsdl: str, base_url: str) -> dict[str, Any]:
    """Import, (WSDL load,) and one HasBeenVerified call, each library on its
    own default connection layer, to a server on loopback that answers at once."""
    import asyncio

    if contender == "verif_client":
        import verif_client

        async def first_call() -> object:
            async with verif_client.VerificationClient(
                base_url, username="u", password="p"
            ) as client:
                return await client.has_been_verified(2**32 + 1)
    else:
        import zeep

        client = zeep.AsyncClient(wsdl)

        async def first_call() -> object:
            header = {"AuthenticationHeader": {"ApiUsername": "u", "ApiPassword": "p"}}
            try:
                return await client.service.SecureLink_SecurityCode_HasBeenVerified(
                    RequestId=2**32 + 1, _soapheaders=header
                )
            finally:
                await client.transport.aclose()

    result = asyncio.run(first_call())
    return {"seconds": time.perf_counter() - STARTED, "result": repr(result)[:80]}


if __name__ == "__main__":
    kind, *args = sys.argv[1:]
    if kind == "scale":
        out = scale(int(args[0]), traced=args[1:] == ["traced"])
    elif kind == "issue5":
        out = issue5(args[0], int(args[1]), args[2])
    else:
        out = startup(args[0], args[1], args[2])
    print(json.dumps(out))
