"""The async client end to end: every operation in every binding, against the
simulator in-process and over real loopback sockets, on asyncio and trio."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

import verif_client as vc
from verif_client.simulator import Simulator, serve

pytestmark = pytest.mark.anyio

USER, PASSWORD = "acme-api", "s3cr3t-Pa55word!"
BINDINGS = list(vc.Binding)
FAST_RETRY = vc.RetryPolicy(attempts=6, initial_backoff=0.001, max_backoff=0.005, deadline=5)


@pytest.fixture(params=["in-process", "loopback"])
async def client_and_simulator(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[vc.VerificationClient, Simulator]]:
    simulator = Simulator(credentials=(USER, PASSWORD))
    if request.param == "in-process":
        async with vc.VerificationClient(
            "http://simulator",
            username=USER,
            password=PASSWORD,
            transport=httpx.ASGITransport(app=simulator),
        ) as client:
            yield client, simulator
    else:
        async with (
            serve(simulator, host="127.0.0.1", port=0) as server,
            vc.VerificationClient(server.base_url, username=USER, password=PASSWORD) as client,
        ):
            yield client, simulator


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_whole_flow_works_in_every_binding(
    client_and_simulator: tuple[vc.VerificationClient, Simulator], binding: vc.Binding
) -> None:
    client, simulator = client_and_simulator
    sent = await client.send_confirmation_sms(
        "5551234567", "Did you ask to pay $25 to ACME & Co.?", binding=binding
    )
    assert sent.ok
    assert sent.request_id > 2**32

    pending = await client.has_been_verified(sent.request_id, binding=binding)
    assert pending.verified is None
    simulator.verify(sent.request_id)
    assert (await client.has_been_verified(sent.request_id, binding=binding)).verified is True

    location = vc.Location(latitude=-33.5, longitude=1e-05, city="Zürich \N{ROCKET}", distance=7)
    simulator.share_location(sent.request_id, location)
    located = await client.get_mobile_location(sent.request_id, binding=binding)
    assert located.location == location

    assert await client.get_mobile_consent_text(binding=binding) == simulator.consent_text
    assert await client.revoke_mobile_consent("5559876543", binding=binding) is True
    assert await client.revoke_mobile_consent("5559876543", binding=binding) is False

    existing = next(iter(simulator.bad_checks))
    assert await client.update_bad_check_reject_reason(existing, "NSF", binding=binding) is True
    assert simulator.bad_checks[existing] == "NSF"
    assert await client.update_bad_check_reject_reason(7, "NSF", binding=binding) is False

    raw = await client.call(
        "SecureLink_SecurityCode_HasBeenVerified", binding=binding, RequestId=sent.request_id
    )
    assert raw == vc.VerificationResult(verified=True)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_request_log_shows_what_the_client_sent(binding: vc.Binding) -> None:
    simulator = Simulator(credentials=(USER, PASSWORD))
    async with vc.VerificationClient(
        "http://simulator",
        username=USER,
        password=PASSWORD,
        binding=binding,
        transport=httpx.ASGITransport(app=simulator),
    ) as client:
        await client.has_been_verified(2**63 - 1)
    (logged,) = simulator.requests
    assert logged.binding == binding.value
    assert logged.params == {"RequestId": "9223372036854775807"}
    assert logged.credentials_present is binding.is_soap
    if binding is vc.Binding.SOAP11:
        assert logged.soap_action == (
            f'"{vc.DEFAULT_NAMESPACE}/SecureLink_SecurityCode_HasBeenVerified"'
        )
    else:
        assert logged.soap_action is None


async def test_the_service_refusing_an_invalid_number_is_a_result_not_an_exception() -> None:
    simulator = Simulator()
    async with vc.VerificationClient(
        "http://simulator", validate=False, transport=httpx.ASGITransport(app=simulator)
    ) as client:
        sent = await client.send_confirmation_sms("12", "Pay?", binding="http-post")
    assert sent.request_id == 0
    assert sent.error_message
    assert not sent.ok


async def test_an_injected_http_client_is_used_and_left_open() -> None:
    simulator = Simulator()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=simulator)) as http:
        async with vc.VerificationClient("http://simulator", http_client=http) as client:
            await client.get_mobile_consent_text(binding="http-get")
        assert not http.is_closed
        assert len(simulator.requests) == 1


async def test_a_response_over_the_cap_is_refused() -> None:
    simulator = Simulator()
    async with vc.VerificationClient(
        "http://simulator", max_response_bytes=64, transport=httpx.ASGITransport(app=simulator)
    ) as client:
        with pytest.raises(vc.ResponseTooLargeError) as caught:
            await client.get_mobile_consent_text(binding="http-get")
    assert caught.value.operation == "GetMobileConsentText"


async def test_bad_input_is_refused_before_anything_is_sent() -> None:
    simulator = Simulator()
    async with vc.VerificationClient(
        "http://simulator", transport=httpx.ASGITransport(app=simulator)
    ) as client:
        with pytest.raises(vc.RequestValidationError, match="PhoneNumber") as caught:
            await client.send_confirmation_sms("555-1234", "Pay?")
        with pytest.raises(vc.RequestValidationError, match="SOAP"):
            await client.send_confirmation_sms("5551234567", "Pay <ACME>?", binding="http-get")
    assert caught.value.value == "555-1234"
    assert simulator.requests == []


def test_the_constructor_does_no_io_and_checks_its_arguments() -> None:
    client = vc.VerificationClient("http://nowhere.invalid", username=USER, password=PASSWORD)
    assert PASSWORD not in repr(client)
    with pytest.raises(ValueError, match="max_connections"):
        vc.VerificationClient("http://x", max_connections=0)
    with pytest.raises(ValueError, match="binding"):
        vc.VerificationClient("http://x", binding="soap13")


def test_turning_tls_verification_off_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="verif_client"):
        vc.VerificationClient("https://api.example", verify=False)
    assert "TLS certificate verification is OFF" in caplog.text


def test_the_blocking_facade_has_the_same_methods() -> None:
    simulator = Simulator(credentials=(USER, PASSWORD))
    with vc.SyncVerificationClient(
        "http://simulator",
        username=USER,
        password=PASSWORD,
        transport=httpx.ASGITransport(app=simulator),
    ) as client:
        sent = client.send_confirmation_sms("5551234567", "Did you ask to pay?")
        simulator.verify(sent.request_id)
        assert client.has_been_verified(sent.request_id).verified is True
        assert client.get_mobile_consent_text(binding="soap12") == simulator.consent_text
        assert PASSWORD not in repr(client)
    with pytest.raises(RuntimeError, match="closed"):
        client.get_mobile_consent_text()


async def test_before_send_runs_once_right_before_the_request_leaves() -> None:
    simulator = Simulator()
    seen: list[int] = []

    async def record() -> None:
        seen.append(len(simulator.requests))

    async with vc.VerificationClient(
        "http://simulator",
        rate_limit=1000,
        transport=httpx.ASGITransport(app=simulator),
        username=USER,
        password=PASSWORD,
    ) as client:
        params = {"PhoneNumber": "5551234567", "ConfirmationQuestion": "Pay?"}
        await client.call_with(
            "SecureLink_Confirmation_SendRequestViaSms", params, before_send=record
        )
    assert seen == [0]
    assert len(simulator.requests) == 1


async def test_a_failing_before_send_sends_nothing() -> None:
    simulator = Simulator()

    async def refuse() -> None:
        raise LookupError("row taken by another worker")

    async with vc.VerificationClient(
        "http://simulator", transport=httpx.ASGITransport(app=simulator)
    ) as client:
        with pytest.raises(LookupError):
            await client.call_with("GetMobileConsentText", {}, before_send=refuse)
    assert simulator.requests == []


@pytest.mark.parametrize("binding", BINDINGS)
async def test_an_in_memory_mock_transport_works_too(binding: vc.Binding) -> None:
    """httpx.MockTransport hands responses over already read: there is no
    stream left to read, and the size cap must still hold."""

    def answer(request: httpx.Request) -> httpx.Response:
        if binding.is_soap:
            ns = "http://schemas.xmlsoap.org/soap/envelope/"
            if binding is vc.Binding.SOAP12:
                ns = "http://www.w3.org/2003/05/soap-envelope"
            body = (
                f'<soap:Envelope xmlns:soap="{ns}"><soap:Body><GetMobileConsentTextResponse '
                f'xmlns="{vc.DEFAULT_NAMESPACE}"><GetMobileConsentTextResult>Agree?'
                "</GetMobileConsentTextResult></GetMobileConsentTextResponse></soap:Body>"
                "</soap:Envelope>"
            )
        else:
            body = f'<string xmlns="{vc.DEFAULT_NAMESPACE}">Agree?</string>'
        return httpx.Response(200, content=body.encode())

    async with vc.VerificationClient(
        "http://mock", binding=binding, transport=httpx.MockTransport(answer)
    ) as client:
        assert await client.get_mobile_consent_text() == "Agree?"
    async with vc.VerificationClient(
        "http://mock",
        binding=binding,
        max_response_bytes=20,
        transport=httpx.MockTransport(answer),
    ) as client:
        with pytest.raises(vc.ResponseTooLargeError):
            await client.get_mobile_consent_text()


async def test_no_cookie_is_kept_between_calls() -> None:
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("cookie"))
        body = f'<string xmlns="{vc.DEFAULT_NAMESPACE}">Agree?</string>'
        return httpx.Response(200, content=body.encode(), headers={"Set-Cookie": "session=abc"})

    async with vc.VerificationClient(
        "http://mock", binding="http-get", transport=httpx.MockTransport(answer)
    ) as client:
        await client.get_mobile_consent_text()
        await client.get_mobile_consent_text()
    assert seen == [None, None]
