"""Section "hooks": what watching a run costs per request.

HasBeenVerified calls in process (MockTransport, a canned answer) with hooks
off, with an empty hook (the dispatch alone), with ``OpenTelemetryHooks`` on
the bare API (no SDK: OpenTelemetry's no-op), on the SDK with nothing
configured to export, and on the SDK with in-memory span and metric exporters.
Variants are interleaved between repeats so a busy machine hurts all alike;
the figure is CPU time per call, the steadier measure on a shared machine.

"Hooks off costs nothing measurable" is checked on the code itself: the four
``is None`` tests a call makes with hooks off are timed alone and compared
with the cost of the call.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import timeit
from collections.abc import Callable

import httpx

import verif_client as vc

from . import workload
from .common import Report, Settings, ratio, us

# With hooks off a call passes four hook points: call_with, the retry pause,
# the rate limiter and the connection slot (the last two only when they wait).
_HOOK_POINTS = 4


def _sdk_hooks(export: bool) -> vc.OpenTelemetryHooks:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tracer_provider = TracerProvider()
    readers = []
    if export:
        tracer_provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        readers.append(InMemoryMetricReader())
    return vc.OpenTelemetryHooks(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=readers)
    )


def _variants() -> dict[str, Callable[[], object]]:
    variants: dict[str, Callable[[], object]] = {
        "hooks off": lambda: None,
        "an empty hook (dispatch only)": lambda: _Empty(),
    }
    try:
        import opentelemetry.sdk  # noqa: F401
    except ImportError:
        return variants
    variants["OpenTelemetry API, no SDK (no-op)"] = lambda: vc.OpenTelemetryHooks()
    variants["OpenTelemetry SDK, nothing exported"] = lambda: _sdk_hooks(export=False)
    variants["OpenTelemetry SDK, in-memory exporters"] = lambda: _sdk_hooks(export=True)
    return variants


class _Empty(vc.Hooks):
    def on_request_ended(self, event: vc.RequestEnded) -> None:
        pass


async def _calls(hooks: object, count: int) -> float:
    """CPU seconds per call over ``count`` sequential calls."""
    transport = httpx.MockTransport(workload.verify_on_nth_poll(polls=1))
    async with vc.VerificationClient(
        workload.BASE_URL,
        username=workload.USERNAME,
        password=workload.PASSWORD,
        transport=transport,
        hooks=hooks,  # type: ignore[arg-type]
    ) as client:
        for request_id in range(20):  # warm-up: first connection, lazy imports
            await client.has_been_verified(request_id)
        started = time.process_time()
        for request_id in range(count):
            await client.has_been_verified(request_id)
        return (time.process_time() - started) / count


def _hook_points_seconds() -> float:
    """CPU seconds of the hook points a call passes with hooks off."""

    class Client:
        _hooks = None

    client = Client()
    number = 1_000_000
    seconds = min(timeit.repeat(lambda: client._hooks is None, number=number, repeat=5))
    empty = min(timeit.repeat(lambda: None, number=number, repeat=5))
    return max(0.0, seconds - empty) / number * _HOOK_POINTS


def run(report: Report, settings: Settings) -> None:
    count = settings.scaled(3000, 300)
    variants = _variants()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for repeat in range(settings.repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(asyncio.run(_calls(variants[name](), count)))
    per_call = {name: statistics.median(values) for name, values in samples.items()}
    off = per_call["hooks off"]
    spread = statistics.pstdev(samples["hooks off"]) if len(samples["hooks off"]) > 1 else 0.0
    rows: list[list[str]] = []
    for name, seconds in per_call.items():
        extra = seconds - off
        rows.append(
            [name, us(seconds), us(extra) if name != "hooks off" else "-", ratio(seconds, off)]
        )
    points = _hook_points_seconds()
    report.table(
        "Hooks: CPU time per HasBeenVerified call (in process, MockTransport)",
        ["variant", "us per call", "us added", "vs hooks off"],
        rows,
        f"{count:,} sequential calls per run, median of {settings.repeats} interleaved runs. "
        f"Hooks off: run-to-run spread {us(spread)} us; the {_HOOK_POINTS} `is None` tests a "
        f"call passes cost {points * 1e9:.0f} ns in all.",
    )
    report.figures["hooks"] = {
        "us_per_call": {name: seconds * 1e6 for name, seconds in per_call.items()},
        "hooks_off_spread_us": spread * 1e6,
        "hook_points_ns": points * 1e9,
    }
    # Below 1% of a call and below the calls' own run-to-run spread: not measurable.
    negligible = points < 0.01 * off and (spread == 0 or points < spread)
    report.target(
        "hooks off cost nothing measurable (hook points < 1% of a call and < its spread)",
        negligible,
        f"{points * 1e9:.0f} ns of {us(off)} us per call (spread {us(spread)} us)",
    )
