"""What the caller sees when the service or the network misbehaves, and what
is (and is not) sent again."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

import verif_client as vc
from verif_client.simulator import Simulator, SimulatorConfig, serve

pytestmark = pytest.mark.anyio

USER, PASSWORD = "acme-api", "Pa55-never-show-me"
FAST_RETRY = vc.RetryPolicy(attempts=8, initial_backoff=0.001, max_backoff=0.004, deadline=10)
SEND = "SecureLink_Confirmation_SendRequestViaSms"
VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"

SOAP11_FAULT = (
    b'<?xml version="1.0" encoding="utf-8"?><soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/'
    b'soap/envelope/"><soap:Body><soap:Fault><faultcode>soap:Server</faultcode><faultstring>'
    b"Server was unable to process request. ---&gt; Object reference not set.</faultstring>"
    b"<detail /></soap:Fault></soap:Body></soap:Envelope>"
)
SOAP12_FAULT = (
    b'<?xml version="1.0" encoding="utf-8"?><soap:Envelope xmlns:soap="http://www.w3.org/2003/05/'
    b'soap-envelope"><soap:Body><soap:Fault><soap:Code><soap:Value>soap:Receiver</soap:Value>'
    b'</soap:Code><soap:Reason><soap:Text xml:lang="en">Server was unable to process request.'
    b"</soap:Text></soap:Reason><soap:Detail /></soap:Fault></soap:Body></soap:Envelope>"
)
ASMX_500 = (
    b"System.InvalidOperationException: Missing parameter: RequestId.\r\n"
    b"   at System.Web.Services.Protocols.ValueCollectionParameterReader.Read()\r\n"
)
IIS_401 = (
    b'<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" "http://www.w3.org/TR/xhtml1/DTD/'
    b'xhtml1-strict.dtd"><html><head><title>401 - Unauthorized: Access is denied due to invalid '
    b"credentials.</title></head><body><h2>401 - Unauthorized</h2></body></html>"
)

# (status, content type, body, expected error, text the error must carry)
SHAPES: dict[str, tuple[int, str, bytes, type[vc.VerifClientError], str]] = {
    "soap11-fault": (500, "text/xml", SOAP11_FAULT, vc.SoapFault, "Object reference"),
    "soap12-fault": (500, "application/soap+xml", SOAP12_FAULT, vc.SoapFault, "unable"),
    "asmx-500": (500, "text/plain", ASMX_500, vc.HTTPStatusError, "Missing parameter: RequestId."),
    "credentials-200": (
        200,
        "text/xml",
        b"Error Message: Invalid API Credentials",
        vc.AuthenticationError,
        "Invalid API Credentials",
    ),
    "iis-401": (401, "text/html", IIS_401, vc.AuthenticationError, "401 - Unauthorized"),
    "malformed-400": (400, "text/html", b"", vc.HTTPStatusError, "HTTP 400"),
}


def in_process(app: Any) -> vc.VerificationClient:
    """A client with this file's credentials and retries, on an ASGI app in process."""
    return vc.VerificationClient(
        "http://s",
        username=USER,
        password=PASSWORD,
        retry=FAST_RETRY,
        transport=httpx.ASGITransport(app),
    )


def canned(status: int, content_type: str, body: bytes) -> Callable[..., Awaitable[None]]:
    """A peer that answers every request the same way, as a broken service would."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", content_type.encode()), (b"connection", b"close")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_each_error_shape_reaches_the_caller_typed(shape: str, binding: vc.Binding) -> None:
    status, content_type, body, expected, text = SHAPES[shape]
    async with vc.VerificationClient(
        "http://service",
        username=USER,
        password=PASSWORD,
        binding=binding,
        retry=vc.NO_RETRY,
        transport=httpx.ASGITransport(app=canned(status, content_type, body)),
    ) as client:
        with pytest.raises(expected) as caught:
            await client.has_been_verified(5)
    assert text in str(caught.value)
    assert caught.value.operation == VERIFIED
    assert PASSWORD not in str(caught.value)


async def test_the_simulators_credential_failures_are_authentication_errors() -> None:
    for config in (SimulatorConfig(), SimulatorConfig(credential_failure="http-401")):
        simulator = Simulator(credentials=(USER, PASSWORD), config=config)
        async with vc.VerificationClient(
            "http://s", username=USER, password="wrong", transport=httpx.ASGITransport(simulator)
        ) as client:
            with pytest.raises(vc.AuthenticationError):
                await client.get_mobile_consent_text()


async def test_reads_succeed_through_503s_and_dropped_connections() -> None:
    simulator = Simulator(config=SimulatorConfig(fail_503=0.3, drop=0.2, seed=3))
    async with (
        serve(simulator, host="127.0.0.1", port=0) as server,
        vc.VerificationClient(server.base_url, retry=FAST_RETRY, binding="http-get") as client,
    ):
        for _ in range(20):
            assert await client.get_mobile_consent_text() == simulator.consent_text
    assert any(req.dropped for req in simulator.requests)
    assert any(req.status == 503 for req in simulator.requests)


async def test_an_sms_answered_503_is_sent_exactly_once() -> None:
    simulator = Simulator(config=SimulatorConfig(fail_503=1.0))
    async with vc.VerificationClient(
        "http://s", retry=FAST_RETRY, transport=httpx.ASGITransport(simulator)
    ) as client:
        with pytest.raises(vc.HTTPStatusError) as caught:
            await client.send_confirmation_sms("5551234567", "Did you ask to pay?")
    assert caught.value.status_code == 503
    assert len(simulator.calls(SEND)) == 1


@pytest.mark.parametrize("where", ["in-process", "loopback"])
async def test_an_sms_whose_connection_dropped_is_not_resent(where: str) -> None:
    simulator = Simulator(credentials=(USER, PASSWORD), config=SimulatorConfig(drop=1.0))

    async def attempt(client: vc.VerificationClient) -> vc.DeliveryUnknownError:
        with pytest.raises(vc.DeliveryUnknownError) as caught:
            await client.send_confirmation_sms("5551234567", "Did you ask to pay?")
        return caught.value

    options: dict[str, Any] = {"username": USER, "password": PASSWORD, "retry": FAST_RETRY}
    if where == "in-process":
        async with vc.VerificationClient(
            "http://s", transport=httpx.ASGITransport(simulator), **options
        ) as client:
            error = await attempt(client)
    else:
        async with (
            serve(simulator, host="127.0.0.1", port=0) as server,
            vc.VerificationClient(server.base_url, **options) as client,
        ):
            error = await attempt(client)
    assert error.phone_number == "5551234567"
    assert "may have reached the service" in str(error)
    assert PASSWORD not in str(error)
    assert PASSWORD not in repr(error)
    (logged,) = simulator.calls(SEND)
    assert logged.dropped


async def test_a_revoke_in_doubt_names_its_mobile_number() -> None:
    # The operation table marks the parameter that names the phone, whatever its wire name.
    simulator = Simulator(credentials=(USER, PASSWORD), config=SimulatorConfig(drop=1.0))
    async with in_process(simulator) as client:
        with pytest.raises(vc.DeliveryUnknownError) as caught:
            await client.revoke_mobile_consent("5557654321")
    assert caught.value.phone_number == "5557654321"
    assert len(simulator.calls("RevokeMobileConsent")) == 1
    assert [op.name for op in vc.OPERATIONS if op.phone_param] == [
        "SecureLink_Confirmation_SendRequestViaSms",
        "RevokeMobileConsent",
    ]


async def test_a_refused_connection_is_retried_even_for_an_sms() -> None:
    # Nothing listens on port 9 of loopback: the request provably never left.
    attempts = vc.RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=0.002)
    async with vc.VerificationClient("http://127.0.0.1:9", retry=attempts) as client:
        with pytest.raises(vc.TransportError) as caught:
            await client.send_confirmation_sms("5551234567", "Did you ask to pay?")
    assert not isinstance(caught.value, vc.DeliveryUnknownError)


async def outcome_texts(
    client: vc.VerificationClient, operation: str, params: dict[str, object], binding: vc.Binding
) -> list[str]:
    """Everything a user could print about one call's outcome."""
    try:
        return [repr(await client.call_with(operation, params, binding=binding))]
    except vc.VerifClientError as exc:
        return [str(exc), repr(exc), "".join(traceback.format_exception(exc))]


async def test_the_password_never_shows_anywhere(caplog: pytest.LogCaptureFixture) -> None:
    """Across every operation, binding and error path: reprs, messages,
    tracebacks and DEBUG logs."""
    seen: list[str] = []
    simulator = Simulator(
        credentials=(USER, PASSWORD), config=SimulatorConfig(fail_503=0.2, drop=0.1, seed=5)
    )
    wrong = Simulator(credentials=(USER, "other"))
    calls: list[tuple[str, dict[str, object]]] = [
        (SEND, {"PhoneNumber": "5551234567", "ConfirmationQuestion": "Pay?"}),
        (SEND, {"PhoneNumber": "bad", "ConfirmationQuestion": "Pay?"}),
        (VERIFIED, {"RequestId": 2**33}),
        ("SecureLink_MobileLocation_GetResult", {"RequestId": 2**33}),
        ("RevokeMobileConsent", {"MobileNumber": "5551234567"}),
        ("GetMobileConsentText", {}),
        ("UpdatePrivateBadCheckRejectReason", {"BadCheckId": 1, "CheckRejectReason": "NSF"}),
    ]
    with caplog.at_level(logging.DEBUG):
        for app in (simulator, wrong, canned(*SHAPES["soap11-fault"][:3])):
            async with in_process(app) as client:
                seen.append(repr(client))
                for binding in vc.Binding:
                    for operation, params in calls:
                        try:
                            seen.append(
                                repr(await client.call_with(operation, params, binding=binding))
                            )
                        except vc.VerifClientError as exc:
                            seen.extend(
                                [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
                            )
    seen.append(caplog.text)
    assert len(seen) > 50
    assert not [text for text in seen if PASSWORD in text]
