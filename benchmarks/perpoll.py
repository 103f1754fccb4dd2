"""Section 9: CPU per poll with more connections than one core can feed (issue 25).

``latency_server`` (an asyncio Protocol in its own process, pinned to CPU 0,
on uvloop when it is installed) answers HasBeenVerified ``true`` after 50 ms.
Each contender runs in a fresh process pinned to CPU 1, on asyncio and on
uvloop, with 1,024 and 4,096 connections all busy, taking its ids from one
1,000,000-id iterable: after a warm-up, the requests completed in a fixed
window give requests/s, and the process's CPU time over the window gives CPU
µs per request. The contenders:

- the Python limit: an ``asyncio.Protocol`` per connection that writes a
  request and finds the end of the answer, no HTTP library, no XML; each
  request formatted anew, and (issue 40) the same with the request's bytes
  made once (prebuilt), which shows what uvloop saves;
- the same with h11 making the request and parsing the answer;
- aiohttp by hand (its C parser when installed with it) and httpx by hand,
  each answer's ``Verified`` read with lxml;
- ``poll_verifications`` over the iterable, every answer decoded whole.

A second table starts the client with 10,000 and with 1,000,000 ids and
counts CPU from the start to the 5,000th outcome (the intake included), and
when the first outcome came: ids are taken as capacity frees, so the size of
the iterable must not show.

``python -m benchmarks.perpoll CONTENDER LOOP POOL BASE_URL WARM WINDOW IDS STOP``
is one such child; it prints one JSON object.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, Final, cast
from urllib.parse import urlsplit

from verif_client import DEFAULT_NAMESPACE, ENDPOINT_PATH, PollPolicy, PollStatus
from verif_client import VerificationClient as _Client
from verif_client._transport._connection import READ_SIZE

from . import latency_server, workload
from .common import Report, Settings, run_child, run_on

POOLS: Final = (1024, 4096)
LOOPS: Final = ("asyncio", "uvloop")
LATENCY_MS: Final = 50
# How long a warm-up may wait for every connection to be open and used.
_RAMP_LIMIT: Final = 15.0
IDS: Final = 1_000_000
FIRST_ID: Final = 10**9
LIMIT: Final = "asyncio Protocol, no HTTP library (the limit)"
LIMIT_PREBUILT: Final = "asyncio Protocol, request bytes prebuilt (the limit, prebuilt)"
LIMIT_H11: Final = "asyncio Protocol + h11"
AIOHTTP: Final = "aiohttp by hand"
HTTPX: Final = "httpx by hand"
CLIENT: Final = "verif_client poll_verifications"
_VERIFIED_TAG: Final = f"{{{DEFAULT_NAMESPACE}}}Verified"
_ZERO: Final = PollPolicy(initial_delay=0, max_delay=0, jitter=0, timeout=600)


class Stats:
    def __init__(self, stop: int = 0) -> None:
        self.done = 0
        self.errors = 0
        self.first_at: float | None = None
        self.stop = stop
        self.reached = asyncio.Event()

    def count(self, ok: bool) -> None:
        if ok:
            self.done += 1
        else:
            self.errors += 1
        if self.first_at is None:
            self.first_at = time.perf_counter()
        if self.done + self.errors == self.stop:
            self.reached.set()


Contender = Callable[[str, int, Iterable[int], Stats], Awaitable[None]]


def _request(base_url: str, request_id: int) -> bytes:
    body = (workload.HAND_TEMPLATE % request_id).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in workload.HAND_HEADERS.items())
    return (
        f"POST {ENDPOINT_PATH} HTTP/1.1\r\nHost: {urlsplit(base_url).netloc}\r\n{head}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


class _Limit(asyncio.Protocol):
    """One connection: write a request, find the end of its answer, write the next."""

    def __init__(self, base_url: str, ids: Iterator[int], stats: Stats) -> None:
        self.base_url = base_url
        self.ids = ids
        self.stats = stats
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports have asyncio's methods without its base class.
        self.transport = cast("asyncio.Transport", transport)
        # asyncio reads into a fresh 256 KiB buffer, which glibc serves with an
        # mmap (or a heap it then trims): page faults on every answer, whose
        # cost on this VM changes by the hour (a limit of 13 µs in one run, 40
        # in another). The client reads 64 KiB at a time; so does the limit.
        if getattr(transport, "max_size", 0) > READ_SIZE:
            transport.max_size = READ_SIZE  # type: ignore[attr-defined]
        self.next()

    def next(self) -> None:
        request_id = next(self.ids, None)
        if request_id is not None and self.transport is not None:
            self.transport.write(_request(self.base_url, request_id))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buffer[:end].lower()
        at = head.find(b"content-length:")
        length = int(head[at + 15 :].split(b"\r\n", 1)[0])
        if len(self.buffer) < end + 4 + length:
            return
        ok = head.startswith(b"http/1.1 200") and b"true" in self.buffer[end + 4 :]
        self.buffer = b""
        self.stats.count(ok)
        self.next()


class _LimitPrebuilt(_Limit):
    """The limit with the request's bytes made once: each request is one
    bytes ``%`` of the id into them. Formatting every request anew (as _Limit
    does) costs as much as uvloop saves on a request's loop work, and so hid
    most of that saving."""

    def __init__(self, base_url: str, ids: Iterator[int], stats: Stats) -> None:
        super().__init__(base_url, ids, stats)
        # Ids of one width (FIRST_ID onwards): one Content-Length for all.
        self.template = (
            _request(base_url, FIRST_ID).replace(b"%", b"%%").replace(str(FIRST_ID).encode(), b"%d")
        )

    def next(self) -> None:
        request_id = next(self.ids, None)
        if request_id is not None and self.transport is not None:
            self.transport.write(self.template % request_id)


class _LimitH11(_Limit):
    def __init__(self, base_url: str, ids: Iterator[int], stats: Stats) -> None:
        import h11

        super().__init__(base_url, ids, stats)
        self.h11 = h11
        self.connection = h11.Connection(h11.CLIENT)
        self.headers = [("Host", urlsplit(base_url).netloc), *workload.HAND_HEADERS.items()]

    def next(self) -> None:
        h11, h = self.h11, self.connection
        request_id = next(self.ids, None)
        if request_id is None or self.transport is None:
            return
        body = (workload.HAND_TEMPLATE % request_id).encode()
        request = h11.Request(
            method="POST",
            target=ENDPOINT_PATH,
            headers=[*self.headers, ("Content-Length", str(len(body)))],
        )
        data = (h.send(request) or b"") + (h.send(h11.Data(data=body)) or b"")
        self.transport.write(data + (h.send(h11.EndOfMessage()) or b""))

    def data_received(self, data: bytes) -> None:
        h11, h = self.h11, self.connection
        h.receive_data(data)
        while True:
            event = h.next_event()
            if event is h11.NEED_DATA:
                return
            if type(event) is h11.Response:
                self.status = event.status_code
            elif type(event) is h11.Data:
                self.buffer += event.data
            elif type(event) is h11.EndOfMessage:
                ok = self.status == 200 and b"true" in self.buffer
                self.buffer = b""
                h.start_next_cycle()
                self.stats.count(ok)
                self.next()
                return


def _protocol(kind: type[_Limit]) -> Contender:
    async def run(base_url: str, pool: int, ids: Iterable[int], stats: Stats) -> None:
        loop = asyncio.get_running_loop()
        parts = urlsplit(base_url)
        shared = iter(ids)
        transports = []
        try:
            for _ in range(pool):
                transport, _protocol = await loop.create_connection(
                    lambda: kind(base_url, shared, stats), parts.hostname, parts.port
                )
                transports.append(transport)
            await asyncio.Event().wait()
        finally:
            for transport in transports:
                transport.abort()

    return run


def _verified(body: bytes) -> bool:
    from lxml import etree

    found = etree.fromstring(body).find(f".//{_VERIFIED_TAG}")
    return found is not None and found.text == "true"


async def _workers(pool: int, ids: Iterable[int], worker: Callable[[Iterator[int]], Any]) -> None:
    shared = iter(ids)
    tasks = [asyncio.ensure_future(worker(shared)) for _ in range(pool)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


async def aiohttp_by_hand(base_url: str, pool: int, ids: Iterable[int], stats: Stats) -> None:
    import aiohttp

    url = base_url + ENDPOINT_PATH
    connector = aiohttp.TCPConnector(limit=pool)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker(shared: Iterator[int]) -> None:
            for request_id in shared:
                try:
                    async with session.post(
                        url, data=workload.HAND_TEMPLATE % request_id, headers=workload.HAND_HEADERS
                    ) as response:
                        body = await response.read()
                    stats.count(response.status == 200 and _verified(body))
                except aiohttp.ClientError:
                    stats.count(False)

        await _workers(pool, ids, worker)


async def httpx_by_hand(base_url: str, pool: int, ids: Iterable[int], stats: Stats) -> None:
    import httpx

    url = base_url + ENDPOINT_PATH
    limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool)
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:

        async def worker(shared: Iterator[int]) -> None:
            for request_id in shared:
                try:
                    response = await http.post(
                        url,
                        content=workload.HAND_TEMPLATE % request_id,
                        headers=workload.HAND_HEADERS,
                    )
                    stats.count(response.status_code == 200 and _verified(response.content))
                except httpx.HTTPError:
                    stats.count(False)

        await _workers(pool, ids, worker)


async def poll_verifications(base_url: str, pool: int, ids: Iterable[int], stats: Stats) -> None:
    async with (
        _Client(
            base_url, username=workload.USERNAME, password=workload.PASSWORD, max_connections=pool
        ) as client,
        client.poll_verifications(ids, policy=_ZERO, max_concurrency=pool) as outcomes,
    ):
        async for outcome in outcomes:
            stats.count(outcome.status is PollStatus.VERIFIED)


CONTENDERS: Final[dict[str, tuple[Contender, str | None]]] = {
    LIMIT: (_protocol(_Limit), None),
    LIMIT_PREBUILT: (_protocol(_LimitPrebuilt), None),
    LIMIT_H11: (_protocol(_LimitH11), None),
    AIOHTTP: (aiohttp_by_hand, "aiohttp"),
    HTTPX: (httpx_by_hand, None),
    CLIENT: (poll_verifications, None),
}


def child(
    name: str,
    loop: str,
    pool: int,
    base_url: str,
    warm: float,
    window: float,
    ids: int,
    stop: int,
) -> dict[str, Any]:
    """With ``stop``: CPU and wall from the start to the ``stop``-th outcome; else
    the requests completed in ``window`` seconds after ``warm`` seconds."""
    latency_server.pin(1)
    contender = CONTENDERS[name][0]

    if stop:
        latency_server.first_arrival(base_url)  # forget the runs before this one

    async def main() -> dict[str, Any]:
        stats = Stats(stop)
        began_wall, began_cpu = time.perf_counter(), time.process_time()
        began_monotonic = time.monotonic()
        task = asyncio.ensure_future(
            contender(base_url, pool, range(FIRST_ID, FIRST_ID + ids), stats)
        )
        figures: dict[str, Any] = {}
        if stop:
            task.add_done_callback(lambda _: stats.reached.set())
            await stats.reached.wait()
            wall, cpu = time.perf_counter() - began_wall, time.process_time() - began_cpu
            done = stats.done
        else:
            await asyncio.sleep(warm)
            # Steady state: every connection open and used at least twice
            # (opening thousands at once can outlast a fixed warm-up), for
            # every contender alike; bounded. One that has not got through
            # its pool once in the warm-up (httpx at 4,096) is measured as it is.
            if stats.done >= pool:
                for _ in range(int(_RAMP_LIMIT / 0.1)):
                    if stats.done >= 2 * pool:
                        break
                    await asyncio.sleep(0.1)
            done = stats.done
            wall, cpu = time.perf_counter(), time.process_time()
            await asyncio.sleep(window)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            done = stats.done - done
        if task.done():
            task.result()  # a contender that ended early failed: say why
        task.cancel()
        figures.update(
            requests_per_s=done / wall,
            cpu_us_per_request=cpu / done * 1e6 if done else None,
            errors=stats.errors,
            requests=done,
            first_answer_ms=None if stats.first_at is None else (stats.first_at - began_wall) * 1e3,
        )
        figures["began_monotonic"] = began_monotonic
        return figures

    figures = run_on(loop, main)
    began = figures.pop("began_monotonic")
    if stop:
        arrived = latency_server.first_arrival(base_url)
        figures["first_request_ms"] = None if arrived is None else (arrived - began) * 1e3
    return figures


# -- the section --------------------------------------------------------------


def _available(name: str) -> bool:
    module = CONTENDERS[name][1]
    return module is None or importlib.util.find_spec(module) is not None


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "n/a" if value is None else format(value, spec)


def _quotient(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def run(report: Report, settings: Settings) -> None:
    pools = (64,) if settings.quick else POOLS
    # The warm-up covers opening 4,096 connections at once.
    warm, window = (0.3, 0.3) if settings.quick else (3.0, 2.0)
    repeats = settings.scaled(3, 1)
    loops = [loop for loop in LOOPS if loop == "asyncio" or importlib.util.find_spec(loop)]
    names = [name for name in CONTENDERS if _available(name)]
    missing = [name for name in CONTENDERS if name not in names]
    ids = settings.scaled(IDS, 100_000)
    figures: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    uvloop_server = "uvloop" if "uvloop" in loops else "asyncio"
    with latency_server.running(LATENCY_MS, cpu=0, loop=uvloop_server) as info:
        base_url = info["base_url"]

        def one(name: str, loop: str, pool: int, count: int, stop: int) -> dict[str, Any]:
            return run_child(
                "benchmarks.perpoll",
                name,
                loop,
                str(pool),
                base_url,
                str(warm),
                str(window),
                str(count),
                str(stop),
                timeout=warm + _RAMP_LIMIT + window + 180,
            )

        for pool in pools:
            for loop in loops:
                samples: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
                for repeat in range(repeats):
                    shift = repeat % len(names)
                    for name in names[shift:] + names[:shift]:
                        samples[name].append(one(name, loop, pool, ids, 0))
                figures.setdefault(str(pool), {})[loop] = {
                    name: {
                        "requests_per_s": statistics.median(s["requests_per_s"] for s in runs),
                        "cpu_us_per_request": _median([s["cpu_us_per_request"] for s in runs]),
                        "errors": max(s["errors"] for s in runs),
                    }
                    for name, runs in samples.items()
                }
        intake_pool = pools[0]
        stop = settings.scaled(5000, 200)
        intake: dict[str, dict[str, Any]] = {}
        for count in (10_000, ids):
            runs = [one(CLIENT, "asyncio", intake_pool, count, stop) for _ in range(repeats)]
            intake[str(count)] = {
                key: _median([r[key] for r in runs])
                for key in (
                    "cpu_us_per_request",
                    "first_request_ms",
                    "first_answer_ms",
                    "requests_per_s",
                )
            }
    report.figures["cpu_per_poll"] = {"pools": figures, "intake": intake}
    shape = (ids, intake_pool, stop, warm, window, repeats)
    _tables(report, figures, intake, shape, missing)


def _tables(
    report: Report,
    figures: dict[str, dict[str, dict[str, dict[str, Any]]]],
    intake: dict[str, dict[str, Any]],
    shape: tuple[int, int, int, float, float, int],
    missing: list[str],
) -> None:
    ids, intake_pool, stop, warm, window, repeats = shape
    rows = []
    for pool, by_loop in figures.items():
        for loop, by_name in by_loop.items():
            limit = by_name[LIMIT]["cpu_us_per_request"]
            prebuilt = by_name.get(LIMIT_PREBUILT, {}).get("cpu_us_per_request")
            peer = by_name.get(AIOHTTP, {}).get("requests_per_s")
            for name, f in by_name.items():
                cpu = f["cpu_us_per_request"]
                rows.append(
                    [
                        f"{int(pool):,}",
                        loop,
                        name,
                        f"{f['requests_per_s']:,.0f}",
                        _fmt(cpu),
                        str(f["errors"]),
                        _fmt(_quotient(f["requests_per_s"], peer), ".2f") + "x",
                        _fmt(_quotient(cpu, limit), ".2f") + "x",
                        _fmt(_quotient(cpu, prebuilt), ".2f") + "x",
                    ]
                )
    note = (
        f"Each contender in a fresh process pinned to CPU 1, the server (an asyncio Protocol, "
        f"its own process) on CPU 0, answering after {LATENCY_MS} ms; {warm:g} s warm-up "
        f"(longer, up to {_RAMP_LIMIT:g} s, until every connection has answered twice), then "
        f"requests completed in {window:g} s, median of {repeats} run(s). The ideal is "
        f"connections / {LATENCY_MS} ms."
    )
    if missing:
        note += f" Not installed, so not run: {', '.join(missing)} (`nox -s bench` installs them)."
    report.table(
        f"9. CPU per poll with many connections, ids from a {ids:,}-id iterable (issue 25), median",
        [
            "connections",
            "loop",
            "client",
            "requests/s",
            "CPU µs/request",
            "errors",
            "vs aiohttp",
            "CPU vs limit",
            "CPU vs limit (prebuilt)",
        ],
        rows,
        note,
    )
    report.table(
        f"9b. The intake: poll_verifications with {intake_pool:,} connections, CPU from the "
        f"start to the {stop:,}th outcome",
        [
            "ids in the iterable",
            "CPU µs/outcome",
            "first request at the server after (ms)",
            "first outcome after (ms)",
        ],
        [
            [
                f"{int(count):,}",
                _fmt(f["cpu_us_per_request"]),
                _fmt(f["first_request_ms"]),
                _fmt(f["first_answer_ms"]),
            ]
            for count, f in intake.items()
        ],
        "From the start of the contender (the client made, its modules imported on first use). "
        "The server notes when the first request arrived whole (one monotonic clock for both "
        f"processes); it answers after {LATENCY_MS} ms.",
    )
    _targets(report, figures, intake)


def _targets(
    report: Report,
    figures: dict[str, dict[str, dict[str, dict[str, Any]]]],
    intake: dict[str, dict[str, Any]],
) -> None:
    pools = list(figures)
    for pool in pools:
        for loop, by_name in figures[pool].items():
            ours = by_name[CLIENT]
            if AIOHTTP in by_name:
                share = _quotient(ours["requests_per_s"], by_name[AIOHTTP]["requests_per_s"])
                report.target(
                    f"{int(pool):,} connections, {loop}: requests/s >= 1.4x aiohttp's",
                    share is not None and share >= 1.4,
                    f"{_fmt(share, '.2f')}x ({ours['requests_per_s']:,.0f} vs "
                    f"{by_name[AIOHTTP]['requests_per_s']:,.0f}/s)",
                )
        cpu = _quotient(
            figures[pool]["asyncio"][CLIENT]["cpu_us_per_request"],
            figures[pool]["asyncio"][LIMIT]["cpu_us_per_request"],
        )
        report.target(
            f"{int(pool):,} connections: CPU per poll <= 3x the asyncio Protocol limit",
            cpu is not None and cpu <= 3,
            f"{_fmt(cpu, '.2f')}x",
        )
        if "uvloop" in figures[pool]:
            gain = _quotient(
                figures[pool]["uvloop"][CLIENT]["cpu_us_per_request"],
                figures[pool]["asyncio"][CLIENT]["cpu_us_per_request"],
            )
            report.target(
                f"{int(pool):,} connections: CPU per poll on uvloop <= 0.7x on asyncio",
                gain is not None and gain <= 0.7,
                f"{_fmt(gain, '.2f')}x",
            )
    # Issue 40: against the limit with its request bytes prebuilt, on each loop.
    bounds = {"asyncio": 1.6, "uvloop": 2.0}
    for pool in pools:
        for loop, by_name in figures[pool].items():
            if LIMIT_PREBUILT not in by_name or loop not in bounds:
                continue
            share = _quotient(
                by_name[CLIENT]["cpu_us_per_request"],
                by_name[LIMIT_PREBUILT]["cpu_us_per_request"],
            )
            report.target(
                f"{int(pool):,} connections, {loop}: CPU per poll <= {bounds[loop]:g}x "
                "the prebuilt limit's on the same loop",
                share is not None and share <= bounds[loop],
                f"{_fmt(share, '.2f')}x",
            )
            if AIOHTTP in by_name:
                rate = _quotient(
                    by_name[CLIENT]["requests_per_s"], by_name[AIOHTTP]["requests_per_s"]
                )
                report.target(
                    f"{int(pool):,} connections, {loop}: requests/s >= 3x aiohttp's",
                    rate is not None and rate >= 3,
                    f"{_fmt(rate, '.2f')}x",
                )
    if len(pools) > 1:
        for loop in figures[pools[-1]]:
            growth = _quotient(
                figures[pools[-1]][loop][CLIENT]["cpu_us_per_request"],
                figures[pools[0]][loop][CLIENT]["cpu_us_per_request"],
            )
            report.target(
                f"{loop}: CPU per poll at {int(pools[-1]):,} connections <= 1.15x at "
                f"{int(pools[0]):,} (issue 40)",
                growth is not None and growth <= 1.15,
                f"{_fmt(growth, '.2f')}x",
            )
        for loop in figures[pools[-1]]:
            growth = _quotient(
                figures[pools[-1]][loop][CLIENT]["cpu_us_per_request"],
                figures[pools[0]][loop][CLIENT]["cpu_us_per_request"],
            )
            report.target(
                f"{loop}: CPU per poll at {int(pools[-1]):,} connections <= 1.2x at "
                f"{int(pools[0]):,}",
                growth is not None and growth <= 1.2,
                f"{_fmt(growth, '.2f')}x",
            )
    small, large = intake.values()
    cost = _quotient(large["cpu_us_per_request"], small["cpu_us_per_request"])
    report.target(
        "intake: CPU per poll with 1,000,000 ids no more than with 10,000 (within 10%)",
        cost is not None and cost <= 1.1,
        f"{_fmt(cost, '.2f')}x",
    )
    first = large["first_request_ms"]
    report.target(
        "intake: the first poll leaves within 50 ms (arrives at the server within 50 ms)",
        first is not None and first <= 50,
        f"{_fmt(first, ',.0f')} ms (first outcome after {_fmt(large['first_answer_ms'])} ms)",
    )


if __name__ == "__main__":
    name, loop, pool, base_url, warm, window, count, stop = sys.argv[1:]
    result = child(
        name, loop, int(pool), base_url, float(warm), float(window), int(count), int(stop)
    )
    print(json.dumps(result))
