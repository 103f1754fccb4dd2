"""OpenTelemetry traces and metrics from the hooks (the ``otel`` extra).

Only ``opentelemetry-api`` is used: with no SDK installed and configured the
API's no-op implementations make all of this nearly free, and the application
chooses the SDK, the exporters and the sampling.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ._hooks import LimitWaited, RequestEnded, RequestStarted, RetryScheduled
from ._metrics import METRICS, Kind, Metric, MetricsHooks
from ._service import Binding

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
    from opentelemetry.trace import Span, TracerProvider

_SCOPE = "verif_client"


def _version() -> str:
    from . import __version__

    return __version__


def _method(binding: Binding) -> str:
    return "GET" if binding is Binding.HTTP_GET else "POST"


class _OtelBackend:
    def __init__(self, meter_provider: MeterProvider | None, oldest_age: Any) -> None:
        from opentelemetry import metrics

        meter = metrics.get_meter(_SCOPE, _version(), meter_provider)
        self._instruments: dict[str, Any] = {}
        for metric in METRICS:
            if metric.kind is Kind.COUNTER:
                instrument: Any = meter.create_counter(metric.name, metric.unit, metric.description)
            elif metric.kind is Kind.UP_DOWN:
                instrument = meter.create_up_down_counter(
                    metric.name, metric.unit, metric.description
                )
            elif metric.kind is Kind.HISTOGRAM:
                instrument = meter.create_histogram(
                    metric.name,
                    metric.unit,
                    metric.description,
                    explicit_bucket_boundaries_advisory=metric.buckets,
                )
            else:

                def observe(
                    options: CallbackOptions, read: Any = oldest_age
                ) -> Iterable[Observation]:
                    from opentelemetry.metrics import Observation

                    return [Observation(read())]

                instrument = meter.create_observable_gauge(
                    metric.name, [observe], metric.unit, metric.description
                )
            self._instruments[metric.name] = instrument

    def add(self, metric: Metric, value: float, labels: Mapping[str, str]) -> None:
        self._instruments[metric.name].add(value, labels)

    def record(self, metric: Metric, value: float, labels: Mapping[str, str]) -> None:
        self._instruments[metric.name].record(value, labels)


class OpenTelemetryHooks(MetricsHooks):
    """Hooks that report to OpenTelemetry: a CLIENT span per call and the metrics
    of the documentation's "Watching a run" page (needs the ``otel`` extra).

    Spans follow the HTTP client semantic conventions (``http.request.method``,
    ``server.address``, ``server.port``, ``http.response.status_code``,
    ``error.type``, ``http.request.resend_count``) and are named after the
    operation, as every SOAP call shares one method and URL. Retries and limit
    waits are span events. Nothing from a request or answer body, and no
    credential, is ever recorded. The providers default to the global ones.
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:  # pragma: no cover - exercised without the extra
            raise ImportError(
                "OpenTelemetryHooks needs the otel extra: pip install 'verif-client[otel]'"
            ) from exc
        super().__init__(_OtelBackend(meter_provider, self.oldest_age))
        self._trace = trace
        self._tracer = trace.get_tracer(_SCOPE, _version(), tracer_provider)
        self._spans: dict[int, Span] = {}

    def on_request_started(self, event: RequestStarted) -> None:
        """Start the call's ``CLIENT`` span, a child of the current span."""
        attributes: dict[str, str | int] = {
            "http.request.method": _method(event.binding),
            "server.address": event.server_address,
            "verif_client.operation": event.operation,
            "verif_client.binding": event.binding.value,
        }
        if event.server_port is not None:
            attributes["server.port"] = event.server_port
        self._spans[event.call_id] = self._tracer.start_span(
            event.operation, kind=self._trace.SpanKind.CLIENT, attributes=attributes
        )

    def on_retry_scheduled(self, event: RetryScheduled) -> None:
        """Add a ``retry`` event to the call's span, and count the retry."""
        super().on_retry_scheduled(event)
        span = self._spans.get(event.call_id)
        if span is not None:
            attributes: dict[str, str | int | float] = {
                "verif_client.attempt": event.attempt,
                "error.type": event.error_type,
                "verif_client.retry.delay": event.delay,
            }
            if event.status is not None:
                attributes["http.response.status_code"] = event.status
            span.add_event("retry", attributes)

    def on_limit_waited(self, event: LimitWaited) -> None:
        """Add a ``limit_wait`` event to the call's span, and record the wait."""
        super().on_limit_waited(event)
        span = self._spans.get(event.call_id)
        if span is not None:
            span.add_event(
                "limit_wait",
                {"verif_client.limit": event.limit, "verif_client.wait": event.seconds},
            )

    def on_request_ended(self, event: RequestEnded) -> None:
        """End the call's span with its status, and record its count and duration."""
        super().on_request_ended(event)
        span = self._spans.pop(event.call_id, None)
        if span is None:
            return
        if event.status is not None:
            span.set_attribute("http.response.status_code", event.status)
        if event.attempt > 1:
            span.set_attribute("http.request.resend_count", event.attempt - 1)
        if event.error_type is not None:
            span.set_attribute("error.type", event.error_type)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.error_type))
        span.end()
