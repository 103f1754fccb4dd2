"""Section 7: latency-bound polling (issue 14), and the transport's in-process overhead.

A near remote service: ``latency_server`` (an asyncio Protocol in its own
process, pinned to CPU 0) answers HasBeenVerified ``true`` after 50 ms. Each
contender runs in a fresh process pinned to CPU 1 with a pool of 16, 256 and
1,024 connections, all of them busy: after a warm-up, the requests completed
in a fixed window give requests/s, and the process's CPU time over the same
window gives CPU µs per request.

``python -m benchmarks.latency CONTENDER POOL BASE_URL WSDL WARM WINDOW`` is
one such child; it prints one JSON object.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from verif_client import (
    DEFAULT_NAMESPACE,
    ENDPOINT_PATH,
    Binding,
    Credentials,
    HTTPRequest,
    PollPolicy,
    PollStatus,
    VerificationClient,
    VerificationResult,
    codec_for,
)

from . import latency_server, workload
from .common import Report, Settings, median_per_call, run_child, us

POOLS: Final = (16, 256, 1024)
LATENCY_MS: Final = 50
FLOOR: Final = "h11 over anyio (floor)"
POLL: Final = "verif_client poll_verifications"
_VERIFIED_TAG: Final = f"{{{DEFAULT_NAMESPACE}}}Verified"


class Stats:
    def __init__(self) -> None:
        self.done = 0
        self.errors = 0


Contender = Callable[[str, int, str, Stats], Awaitable[None]]

# -- the contenders, each keeping ``pool`` requests in flight until cancelled ----


async def floor(base_url: str, pool: int, wsdl: str, stats: Stats) -> None:
    """N connections, each a loop of exchanges: h11 over anyio, nothing else."""
    import anyio
    import h11

    parts = urlsplit(base_url)
    headers = [
        ("Host", parts.netloc),
        *workload.HAND_HEADERS.items(),
    ]
    counter = iter(range(1, 10**12))

    async def connection() -> None:
        stream = await anyio.connect_tcp(parts.hostname or "", parts.port or 80)
        h = h11.Connection(h11.CLIENT)
        while True:
            body = (workload.HAND_TEMPLATE % next(counter)).encode()
            request = h11.Request(
                method="POST",
                target=ENDPOINT_PATH,
                headers=[*headers, ("Content-Length", str(len(body)))],
            )
            data = h.send(request) or b""
            data += (h.send(h11.Data(data=body)) or b"") + (h.send(h11.EndOfMessage()) or b"")
            await stream.send(data)
            while True:
                event = h.next_event()
                if event is h11.NEED_DATA:
                    h.receive_data(await stream.receive())
                elif type(event) is h11.EndOfMessage:
                    break
            h.start_next_cycle()
            stats.done += 1

    async with anyio.create_task_group() as tg:
        for _ in range(pool):
            tg.start_soon(connection)


async def poll_verifications(base_url: str, pool: int, wsdl: str, stats: Stats) -> None:
    """Every id true at its first poll, no poll delay; a new id for each settled one."""
    zero = PollPolicy(initial_delay=0, max_delay=0, jitter=0, timeout=600)
    async with VerificationClient(
        base_url, username=workload.USERNAME, password=workload.PASSWORD, max_connections=pool
    ) as client:
        stream_cm = client.poll_verifications([], policy=zero, max_concurrency=pool, keep_open=True)
        async with stream_cm as stream:
            next_id = 1
            for _ in range(2 * pool):
                stream.add(next_id)
                next_id += 1
            async for outcome in stream:
                if outcome.status is PollStatus.VERIFIED:
                    stats.done += 1
                else:
                    stats.errors += 1
                stream.add(next_id)
                next_id += 1


async def direct_calls(base_url: str, pool: int, wsdl: str, stats: Stats) -> None:
    import anyio

    async with VerificationClient(
        base_url, username=workload.USERNAME, password=workload.PASSWORD, max_connections=pool
    ) as client:

        async def worker(offset: int) -> None:
            request_id = offset * 10**9
            while True:
                request_id += 1
                try:
                    await client.has_been_verified(request_id)
                    stats.done += 1
                except Exception:
                    stats.errors += 1

        async with anyio.create_task_group() as tg:
            for offset in range(pool):
                tg.start_soon(worker, offset + 1)


async def httpx_by_hand(base_url: str, pool: int, wsdl: str, stats: Stats) -> None:
    import anyio
    import httpx
    from lxml import etree

    url = base_url + ENDPOINT_PATH
    limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool)
    async with httpx.AsyncClient(limits=limits, timeout=30) as http:

        async def worker(offset: int) -> None:
            request_id = offset * 10**9
            while True:
                request_id += 1
                try:
                    response = await http.post(
                        url,
                        content=workload.HAND_TEMPLATE % request_id,
                        headers=workload.HAND_HEADERS,
                    )
                    etree.fromstring(response.content).find(f".//{_VERIFIED_TAG}")
                    stats.done += 1
                except httpx.HTTPError:
                    stats.errors += 1

        async with anyio.create_task_group() as tg:
            for offset in range(pool):
                tg.start_soon(worker, offset + 1)


async def zeep_async(base_url: str, pool: int, wsdl: str, stats: Stats) -> None:
    import anyio
    import httpx
    import zeep
    from zeep.proxy import AsyncServiceProxy
    from zeep.transports import AsyncTransport

    limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool)
    http = httpx.AsyncClient(limits=limits, timeout=30)
    client = zeep.AsyncClient(wsdl, transport=AsyncTransport(client=http))
    binding = client.wsdl.bindings[f"{{{DEFAULT_NAMESPACE}}}InquiriesWSSoap"]
    service = AsyncServiceProxy(client, binding, address=base_url + ENDPOINT_PATH)
    header = {
        "AuthenticationHeader": {"ApiUsername": workload.USERNAME, "ApiPassword": "pw"},
    }

    async def worker(offset: int) -> None:
        request_id = offset * 10**9
        while True:
            request_id += 1
            try:
                await service.SecureLink_SecurityCode_HasBeenVerified(
                    RequestId=request_id, _soapheaders=header
                )
                stats.done += 1
            except Exception:
                stats.errors += 1

    try:
        async with anyio.create_task_group() as tg:
            for offset in range(pool):
                tg.start_soon(worker, offset + 1)
    finally:
        with anyio.CancelScope(shield=True):
            await http.aclose()


CONTENDERS: Final[dict[str, Contender]] = {
    POLL: poll_verifications,
    "verif_client direct calls": direct_calls,
    FLOOR: floor,
    "httpx.AsyncClient by hand": httpx_by_hand,
    "zeep AsyncClient": zeep_async,
}


def child(
    name: str, pool: int, base_url: str, wsdl: str, warm: float, window: float
) -> dict[str, Any]:
    import anyio

    latency_server.pin(1)
    stats = Stats()

    async def main() -> dict[str, Any]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(CONTENDERS[name], base_url, pool, wsdl, stats)
            await anyio.sleep(warm)
            done, errors = stats.done, stats.errors
            wall, cpu = time.perf_counter(), time.process_time()
            await anyio.sleep(window)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            done, errors = stats.done - done, stats.errors - errors
            tg.cancel_scope.cancel()
        return {
            "requests_per_s": done / wall,
            "cpu_us_per_request": cpu / done * 1e6 if done else None,
            "errors": stats.errors,
            "requests": done,
        }

    return anyio.run(main)


# -- the section --------------------------------------------------------------


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def run(report: Report, settings: Settings) -> None:
    # The warm-up covers opening 1,024 connections at once (a SYN dropped from a
    # full accept queue is retried after a second).
    warm, window = (2.0, 1.5) if settings.quick else (2.0, 2.0)
    # Five: the targets hinge on a ratio of two noisy figures on a shared machine.
    repeats = settings.scaled(5, 1)
    names = list(CONTENDERS)
    figures: dict[str, dict[str, dict[str, Any]]] = {}
    with (
        latency_server.running(LATENCY_MS, cpu=0) as info,
        tempfile.TemporaryDirectory() as tmp,
    ):
        base_url = info["base_url"]
        wsdl = workload.write_wsdl(Path(tmp), location=base_url + ENDPOINT_PATH)
        for pool in POOLS:
            samples: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
            for repeat in range(repeats):
                shift = repeat % len(names)
                for name in names[shift:] + names[:shift]:
                    samples[name].append(
                        run_child(
                            "benchmarks.latency",
                            name,
                            str(pool),
                            base_url,
                            str(wsdl),
                            str(warm),
                            str(window),
                            timeout=warm + window + 120,
                        )
                    )
            figures[str(pool)] = {
                name: {
                    "requests_per_s": statistics.median(s["requests_per_s"] for s in runs),
                    "cpu_us_per_request": _median([s["cpu_us_per_request"] for s in runs]),
                    "errors": max(s["errors"] for s in runs),
                }
                for name, runs in samples.items()
            }
    report.figures["latency_polling"] = figures
    rows = []
    for pool, by_name in figures.items():
        base = by_name[FLOOR]
        for name, f in by_name.items():
            cpu = f["cpu_us_per_request"]
            rows.append(
                [
                    f"{int(pool):,}",
                    name,
                    f"{f['requests_per_s']:,.0f}",
                    "n/a" if cpu is None else f"{cpu:,.0f}",
                    str(f["errors"]),
                    f"{f['requests_per_s'] / base['requests_per_s']:.0%}",
                    "n/a" if cpu is None else f"{cpu / base['cpu_us_per_request']:.2f}x",
                ]
            )
    report.table(
        f"7. Latency-bound polling: server answers after {LATENCY_MS} ms, median",
        [
            "connections",
            "client",
            "requests/s",
            "CPU µs/request",
            "errors",
            "vs floor",
            "CPU vs floor",
        ],
        rows,
        f"Each contender in a fresh process pinned to CPU 1, the server (an asyncio Protocol, "
        f"its own process) on CPU 0; {warm:g} s warm-up, then requests completed in "
        f"{window:g} s, {repeats} run(s) each. The ideal is connections / 50 ms.",
    )
    ours, best, top = figures["256"][POLL], figures["256"][FLOOR], figures["1024"][POLL]
    share = ours["requests_per_s"] / best["requests_per_s"]
    report.target(
        "256 connections: poll_verifications >= 80% of the floor's requests/s",
        share >= 0.8,
        f"{share:.0%} ({ours['requests_per_s']:,.0f} vs {best['requests_per_s']:,.0f}/s)",
    )
    cpu_ratio = (ours["cpu_us_per_request"] or float("inf")) / best["cpu_us_per_request"]
    report.target(
        "256 connections: poll_verifications CPU/request within 1.3x of the floor's",
        cpu_ratio <= 1.3,
        f"{cpu_ratio:.2f}x ({ours['cpu_us_per_request'] or 0:,.0f} vs "
        f"{best['cpu_us_per_request']:,.0f} µs)",
    )
    kept = top["requests_per_s"] / ours["requests_per_s"]
    report.target(
        "1,024 connections: poll_verifications without errors, >= 90% of its 256 figure",
        top["errors"] == 0 and kept >= 0.9,
        f"{top['errors']} errors, {kept:.0%} ({top['requests_per_s']:,.0f}/s)",
    )


# -- in process: what the client adds to the codec -------------------------------


def overhead(report: Report, settings: Settings) -> None:
    """A full HasBeenVerified call through ``transport=`` against the codec alone.

    The target is timed on the path a user who tests in process takes with
    this library: a ``verif_client.Transport`` (what ``Simulator.transport()``
    is), here one answering at once with canned bytes, so that only the
    client's own cost is on top of the codec's. The httpx adapter path (a
    canned ``httpx.AsyncBaseTransport``) and the simulator in process, both
    ways, are timed beside it.
    """
    import asyncio

    import httpx

    from verif_client.simulator import Simulator

    op = workload.VERIFIED_OP
    body = workload.response_body(op, Binding.SOAP11, VerificationResult(True))
    codec = codec_for(Binding.SOAP11)
    credentials = Credentials(workload.USERNAME, workload.PASSWORD)
    params = {"RequestId": 4294967297}
    headers = (("Content-Type", "text/xml; charset=utf-8"),)

    def codec_call() -> object:
        codec.encode(op, params, credentials=credentials)
        return codec.decode(op, 200, headers, body)

    class CannedHttpx(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, headers=headers, content=body)

    class Canned:  # a verif_client.Transport
        async def send(
            self,
            request: HTTPRequest,
            *,
            time_limit: float,
            max_response_bytes: int,
            operation: str,
        ) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
            return 200, headers, body

        async def aclose(self) -> None:
            pass

    number = settings.scaled(5000, 500)
    repeats = settings.scaled(settings.repeats, 2)
    codec_seconds = median_per_call(codec_call, number, repeats)
    simulator = Simulator()
    contenders: dict[str, Any] = {
        OWN_TRANSPORT: Canned(),
        HTTPX_TRANSPORT: CannedHttpx(),
        SIM_TRANSPORT: simulator.transport(),
        SIM_ASGI: httpx.ASGITransport(app=simulator),
    }

    async def calls() -> dict[str, list[float]]:
        clients = {
            name: VerificationClient(
                workload.BASE_URL,
                username=workload.USERNAME,
                password=workload.PASSWORD,
                transport=transport,
            )
            for name, transport in contenders.items()
        }
        sms = await clients[SIM_TRANSPORT].send_confirmation_sms("5551234567", "Pay?")
        simulator.verify(sms.request_id)
        samples: dict[str, list[float]] = {name: [] for name in clients}
        for client in clients.values():
            await client.has_been_verified(sms.request_id)
        # Interleaved: each repeat times every contender once, in turn.
        for _ in range(repeats):
            for name, client in clients.items():
                started = time.perf_counter()
                for _ in range(number):
                    await client.has_been_verified(sms.request_id)
                samples[name].append((time.perf_counter() - started) / number)
        for client in clients.values():
            await client.aclose()
        return samples

    seconds = {name: statistics.median(runs) for name, runs in asyncio.run(calls()).items()}
    call_seconds = seconds[OWN_TRANSPORT]
    factor = call_seconds / codec_seconds
    report.figures["transport_overhead"] = {"codec": codec_seconds, **seconds}
    report.table(
        "8. In process: a full call through transport= against the codec alone, µs (median)",
        ["what", "µs per call", "vs codec"],
        [
            ["codec encode + decode (SOAP 1.1 HasBeenVerified)", us(codec_seconds), "1.00x"],
            *(
                [name, us(value), f"{value / codec_seconds:.2f}x"]
                for name, value in seconds.items()
            ),
        ],
        "The first two transports answer at once with canned bytes, so the rows show what the "
        "client adds to the codec: the retry loop, the limiter, the scrubbing of answers and, "
        "for httpx, building the httpx.Request and Response. The last two run the simulator in "
        "process (its own parsing and answer included), the way a test would.",
    )
    report.target(
        "in process, a full call via transport= <= 2x the codec's cost",
        factor <= 2,
        f"{factor:.2f}x ({us(call_seconds)} vs {us(codec_seconds)} µs, a verif_client.Transport; "
        f"an httpx transport: {seconds[HTTPX_TRANSPORT] / codec_seconds:.2f}x)",
    )


OWN_TRANSPORT: Final = "a full call via transport= (a verif_client.Transport, canned)"
HTTPX_TRANSPORT: Final = "a full call via transport= (an httpx.AsyncBaseTransport, canned)"
SIM_TRANSPORT: Final = "a full call to the simulator via transport=simulator.transport()"
SIM_ASGI: Final = "a full call to the simulator via httpx.ASGITransport(app=simulator)"


if __name__ == "__main__":
    name, pool, base_url, wsdl, warm, window = sys.argv[1:]
    print(json.dumps(child(name, int(pool), base_url, wsdl, float(warm), float(window))))
