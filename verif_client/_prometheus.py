"""Prometheus metrics for the CLI's ``--metrics-port`` (the ``prometheus`` extra).

The metrics are the table of ``_metrics``, kept by the same hooks as the
OpenTelemetry ones, plus the job's rows by state for ``bulk run`` and the
simulator's request log for ``simulate``. The endpoint serves from a thread of
its own: a scrape never waits for the event loop, and reads only counters the
loop keeps.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ._argtypes import PORT
from ._metrics import JOB_ROWS, METRICS, Kind, Metric, MetricsHooks
from .bulk._job import FINAL_STATES

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric as PrometheusMetric

    from .bulk._runner import Progress
    from .simulator import Simulator


class _PrometheusBackend:
    def __init__(self, registry: CollectorRegistry, oldest_age: Callable[[], float]) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self._instruments: dict[str, Any] = {}
        for metric in METRICS:
            name, text, labels = metric.prometheus_name, metric.description, metric.labels
            instrument: Any
            if metric.kind is Kind.COUNTER:
                instrument = Counter(name, text, labels, registry=registry)
            elif metric.kind is Kind.UP_DOWN:
                instrument = Gauge(name, text, labels, registry=registry)
            elif metric.kind is Kind.HISTOGRAM:
                instrument = Histogram(
                    name, text, labels, registry=registry, buckets=metric.buckets
                )
            else:
                instrument = Gauge(name, text, labels, registry=registry)
                instrument.set_function(oldest_age)
            self._instruments[metric.name] = instrument

    def add(self, metric: Metric, value: float, labels: Mapping[str, str]) -> None:
        self._instruments[metric.name].labels(**labels).inc(value)

    def record(self, metric: Metric, value: float, labels: Mapping[str, str]) -> None:
        self._instruments[metric.name].labels(**labels).observe(value)


class PrometheusHooks(MetricsHooks):
    """Hooks that keep the run's metrics in a ``prometheus_client`` registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(_PrometheusBackend(registry, self.oldest_age))


class _JobRows:
    """The job's rows by state, from the bulk run's latest progress."""

    def __init__(self) -> None:
        self.progress: Progress | None = None

    def collect(self) -> Iterator[PrometheusMetric]:
        from prometheus_client.core import GaugeMetricFamily

        family = GaugeMetricFamily(
            JOB_ROWS.prometheus_name, JOB_ROWS.description, labels=JOB_ROWS.labels
        )
        progress = self.progress
        if progress is not None:
            for state in sorted(FINAL_STATES):
                family.add_metric([state], progress.states[state])
            family.add_metric(["pending"], progress.pending)
        yield family


class _SimulatorLog:
    """``simulate``'s requests, read from its log at each scrape."""

    def __init__(self, simulator: Simulator) -> None:
        self._simulator = simulator
        self._seen = 0
        self._counts: Counter[tuple[str, str, str]] = Counter()

    def collect(self) -> Iterator[PrometheusMetric]:
        from prometheus_client.core import CounterMetricFamily

        # Only the entries added since the last scrape (the log only grows,
        # unless reset: then count it afresh). The server's thread appends
        # while this one reads: what was counted is what was taken, not the
        # log's length after (an entry added in between would be skipped).
        log = self._simulator.requests
        if len(log) < self._seen:
            self._seen, self._counts = 0, Counter()
        added = log[self._seen :]
        for entry in added:
            status = "dropped" if entry.status is None else str(entry.status)
            self._counts[(entry.operation or "none", entry.binding, status)] += 1
        self._seen += len(added)
        family = CounterMetricFamily(
            "verif_simulator_requests",
            "Calls the simulator answered, by operation, binding and HTTP status",
            labels=("operation", "binding", "status"),
        )
        for labels, count in sorted(self._counts.items()):
            family.add_metric(list(labels), count)
        yield family


def _metrics_port(text: str) -> int:
    if importlib.util.find_spec("prometheus_client") is None:
        raise argparse.ArgumentTypeError(
            "needs the prometheus extra: pip install 'verif-client[prometheus]'"
        )
    return PORT(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("metrics (the prometheus extra)")
    group.add_argument(
        "--metrics-port",
        type=_metrics_port,
        metavar="N",
        help="serve Prometheus metrics on http://HOST:N/metrics (0: any free port, printed)",
    )
    group.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address of the metrics endpoint (default 127.0.0.1; 0.0.0.0 for a remote scraper)",
    )


class Served:
    """What one CLI process serves on ``/metrics``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._hooks: PrometheusHooks | None = None

    @property
    def hooks(self) -> PrometheusHooks:
        """The client's metrics, registered on first use (``simulate`` has no client)."""
        if self._hooks is None:
            self._hooks = PrometheusHooks(self.registry)
        return self._hooks

    def watch_progress(self, display: Callable[[Progress], None]) -> Callable[[Progress], None]:
        """Wrap a bulk run's progress callback so the job's rows are served too."""
        rows = _JobRows()
        self.registry.register(rows)

        def on_progress(progress: Progress) -> None:
            rows.progress = progress
            display(progress)

        return on_progress


def serve(args: argparse.Namespace) -> Served | None:
    """Start the endpoint ``--metrics-port`` asks for (None without it)."""
    if args.metrics_port is None:
        return None
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    server, _thread = start_http_server(args.metrics_port, args.metrics_host, registry)
    host = args.metrics_host
    shown = f"[{host}]" if ":" in host else host
    print(f"metrics: http://{shown}:{server.server_port}/metrics", file=sys.stderr, flush=True)
    return Served(registry)


def hooks_of(served: Served | None) -> PrometheusHooks | None:
    return None if served is None else served.hooks


def progress_of(
    served: Served | None, display: Callable[[Progress], None]
) -> Callable[[Progress], None]:
    return display if served is None else served.watch_progress(display)


def serve_simulator(args: argparse.Namespace, simulator: Simulator) -> None:
    """``simulate --metrics-port``: the simulator's request counts."""
    served = serve(args)
    if served is not None:
        served.registry.register(_SimulatorLog(simulator))
