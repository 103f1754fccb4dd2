"""OpenTelemetry through the SDK's in-memory exporters: span attributes, no secret
in any attribute, and the metrics of a poll run of 1,000 ids."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from realparts import import_real_part

# Before the SDK's imports: a missing SDK skips, or under CI fails (realparts.py).
import_real_part("opentelemetry.sdk", "the OpenTelemetry tests need opentelemetry-sdk")
# ruff: noqa: E402

from hooksupport import (
    FAST_POLL,
    FAST_RETRY,
    PASSWORD,
    PHONE,
    QUESTION,
    SEND,
    USER,
    VERIFIED,
    client_for,
    failing_first,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import verif_client as vc
from verif_client.simulator import Script, Simulator, SimulatorConfig

pytestmark = pytest.mark.anyio


class Telemetry:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[self.reader])
        self.hooks = vc.OpenTelemetryHooks(
            tracer_provider=tracer_provider, meter_provider=meter_provider
        )

    def finished(self) -> tuple[ReadableSpan, ...]:
        return self.spans.get_finished_spans()

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]

    def value(self, name: str, **labels: str) -> float:
        """The sum of a counter's points (a histogram's count) whose labels match."""
        total = 0.0
        for point in self.points(name):
            if all(point.attributes.get(key) == wanted for key, wanted in labels.items()):
                total += point.count if hasattr(point, "count") else point.value
        return total


@pytest.fixture
def telemetry() -> Telemetry:
    return Telemetry()


async def test_a_span_per_call_with_http_client_attributes(telemetry: Telemetry) -> None:
    simulator = Simulator()
    app = failing_first(simulator, 1)
    async with client_for(app, telemetry.hooks, retry=FAST_RETRY, rate_limit=1000) as client:
        await client.get_mobile_consent_text(binding="http_get")
        await client.send_confirmation_sms(PHONE, QUESTION)
    blocked = Simulator(config=SimulatorConfig(blocked=True))
    async with client_for(blocked, telemetry.hooks) as client:
        with pytest.raises(vc.AuthenticationError):
            await client.has_been_verified(1, binding="soap12")
    retried, sent, failed = telemetry.finished()

    assert retried.name == "GetMobileConsentText"
    assert retried.kind is SpanKind.CLIENT
    assert dict(retried.attributes or {}) == {
        "http.request.method": "GET",
        "server.address": "simulator",
        "server.port": 8080,
        "verif_client.operation": "GetMobileConsentText",
        "verif_client.binding": "http-get",
        "http.response.status_code": 200,
        "http.request.resend_count": 1,
    }
    events = {event.name: dict(event.attributes or {}) for event in retried.events}
    assert events["retry"]["verif_client.attempt"] == 1
    assert events["retry"]["http.response.status_code"] == 503
    assert events["retry"]["error.type"] == "HTTPStatusError"
    assert events["limit_wait"]["verif_client.limit"] == "rate"
    assert retried.status.status_code is StatusCode.UNSET

    assert sent.name == SEND
    assert sent.attributes is not None
    assert sent.attributes["http.request.method"] == "POST"
    assert sent.attributes["verif_client.binding"] == "soap11"
    assert "http.request.resend_count" not in sent.attributes

    assert failed.attributes is not None
    assert failed.attributes["error.type"] == "AuthenticationError"
    assert failed.attributes["http.response.status_code"] == 401
    assert failed.attributes["verif_client.binding"] == "soap12"
    assert failed.status.status_code is StatusCode.ERROR

    # A call with a retry counts once; the retry is counted apart.
    consent = {"operation": "GetMobileConsentText", "binding": "http-get"}
    assert telemetry.value("verif_client.requests", **consent, outcome="success") == 1
    assert telemetry.value("verif_client.retries", **consent, error_type="HTTPStatusError") == 1
    assert telemetry.value("verif_client.limit.wait", limit="rate") == 3
    assert telemetry.value("verif_client.requests", outcome="error") == 1


async def test_the_span_of_a_call_is_a_child_of_the_callers_span(telemetry: Telemetry) -> None:
    tracer = telemetry.tracer_provider.get_tracer("shop")
    async with client_for(Simulator(), telemetry.hooks) as client:
        with tracer.start_as_current_span("checkout"):
            await client.get_mobile_consent_text()
        await client.get_mobile_consent_text()
    inside, checkout, outside = telemetry.finished()
    assert checkout.name == "checkout"
    assert inside.parent is not None
    assert inside.parent.span_id == checkout.context.span_id
    assert outside.parent is None


async def test_no_password_or_body_in_any_attribute(telemetry: Telemetry) -> None:
    app = failing_first(Simulator(), 1)
    async with client_for(app, telemetry.hooks, retry=FAST_RETRY) as client:
        await client.get_mobile_consent_text()
        sent = await client.send_confirmation_sms(PHONE, QUESTION)
        await client.revoke_mobile_consent(PHONE)
        async with client.poll_verifications([sent.request_id], policy=FAST_POLL) as outcomes:
            _ = [outcome async for outcome in outcomes]
    spans = telemetry.finished()
    assert len(spans) >= 4
    shown = []
    for span in spans:
        shown.append(span.name)
        shown.extend(f"{key}={value}" for key, value in (span.attributes or {}).items())
        for event in span.events:
            shown.append(event.name)
            shown.extend(f"{key}={value}" for key, value in (event.attributes or {}).items())
        shown.append(str(span.status.description))
    text = "\n".join(shown)
    for secret in (PASSWORD, USER, PHONE, QUESTION, "Envelope", "<soap", "consent"):
        assert secret not in text


async def test_metrics_after_a_poll_run_of_1000_ids(telemetry: Telemetry) -> None:
    simulator = Simulator()
    declined = {f"55500{index:05d}" for index in range(0, 1000, 10)}
    for phone in declined:
        simulator.script_for(phone, Script(answer="declined", pending_polls=1))
    phones = [f"55500{index:05d}" for index in range(1000)]
    fast = Script(pending_polls=1)
    for phone in phones:
        if phone not in declined:
            simulator.script_for(phone, fast)
    async with client_for(simulator, None) as sender:
        ids = [(await sender.send_confirmation_sms(phone, QUESTION)).request_id for phone in phones]
    simulator.reset_log()

    async with client_for(simulator, telemetry.hooks, max_connections=16) as client:
        poll = client.poll_verifications(ids, policy=FAST_POLL, max_concurrency=16)
        statuses: list[vc.PollStatus] = []
        most_waiting = 0.0
        async with poll as outcomes:
            async for outcome in outcomes:
                statuses.append(outcome.status)
                if len(statuses) % 100 == 1:
                    most_waiting = max(most_waiting, telemetry.value("verif_client.poll.waiting"))
                    assert telemetry.points("verif_client.poll.oldest_age")[0].value >= 0
    # Ids are taken as the run has room, not all up front: each counts as
    # waiting from when it is taken until its outcome.
    assert 0 < most_waiting <= 1000

    assert statuses.count(vc.PollStatus.VERIFIED) == 900
    assert statuses.count(vc.PollStatus.DECLINED) == 100
    polls = len(simulator.calls(VERIFIED))
    assert polls == 2000  # one pending answer, then the decision, for each id
    assert telemetry.value("verif_client.requests", operation=VERIFIED, outcome="success") == polls
    assert telemetry.value("verif_client.requests", outcome="error") == 0
    assert telemetry.value("verif_client.request.duration", binding="soap11") == polls
    assert telemetry.value("verif_client.poll.waiting") == 0
    assert telemetry.points("verif_client.poll.oldest_age")[0].value == 0
    assert telemetry.value("verif_client.poll.outcomes", status="verified") == 900
    assert telemetry.value("verif_client.poll.outcomes", status="declined") == 100
    assert telemetry.value("verif_client.poll.time_to_answer", operation=VERIFIED) == 1000
    assert telemetry.value("verif_client.retries") == 0
    assert len(telemetry.finished()) == polls


async def test_ids_of_a_cancelled_poll_run_stop_counting_as_waiting(telemetry: Telemetry) -> None:
    simulator = Simulator(config=SimulatorConfig(script=Script(answer="never")))
    async with client_for(simulator, None) as sender:
        ids = [(await sender.send_confirmation_sms(PHONE, QUESTION)).request_id for _ in range(5)]
    stop = anyio.CancelScope()

    waiting_at_first_poll: list[float] = []

    class StopAtFirstPoll(vc.Hooks):
        def on_poll_polled(self, event: vc.PollPolled) -> None:
            waiting_at_first_poll.append(telemetry.value("verif_client.poll.waiting"))
            stop.cancel()

    async with client_for(simulator, [telemetry.hooks, StopAtFirstPoll()]) as client:
        with stop:
            async with client.poll_verifications(ids, policy=FAST_POLL) as outcomes:
                async for _ in outcomes:
                    raise AssertionError("nobody answers: no outcome can come")
    # Ids are taken as the run has room: at the first poll at least that id waits.
    assert 1 <= waiting_at_first_poll[0] <= len(ids)
    assert telemetry.value("verif_client.poll.waiting") == 0
    assert telemetry.points("verif_client.poll.oldest_age")[0].value == 0
    # Neither an answer nor a timeout: no outcome is counted.
    assert telemetry.value("verif_client.poll.outcomes") == 0
