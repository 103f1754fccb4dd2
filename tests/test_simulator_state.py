"""Scripts, direct control, consent, bad checks, SMS validation and the request log."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from _sim_helpers import EP, LOCATION, NS, REVOKE, SEND, UPDATE, VERIFIED, soap, xml

import verif_client as vc
from verif_client.simulator import Script, Simulator, SimulatorConfig

pytestmark = pytest.mark.anyio

FIRST_ID = 2**32 + 1


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(config: SimulatorConfig | None = None) -> tuple[Simulator, httpx.AsyncClient]:
    sim = Simulator(config=config)
    return sim, httpx.AsyncClient(transport=httpx.ASGITransport(app=sim), base_url="http://s")


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    _, http = make()
    async with http:
        yield http


async def send(http: httpx.AsyncClient, phone: str = "5551234567", question: str = "Ok?") -> int:
    response = await soap(http, SEND, {"PhoneNumber": phone, "ConfirmationQuestion": question})
    text = xml(response).findtext(f".//{{{NS}}}SecureLinkRequestId")
    assert text is not None
    return int(text)


async def verified(http: httpx.AsyncClient, request_id: int) -> bool | None:
    response = await http.get(f"{EP}/{VERIFIED}", params={"RequestId": str(request_id)})
    result = vc.codec_for("http-get").decode(
        VERIFIED, 200, response.headers.items(), response.content
    )
    assert isinstance(result, vc.VerificationResult)
    assert result.error_message is None
    return result.verified


async def location(http: httpx.AsyncClient, request_id: int) -> vc.LocationResult:
    response = await http.post(f"{EP}/{LOCATION}", data={"RequestId": str(request_id)})
    result = vc.codec_for("http-post").decode(
        LOCATION, 200, response.headers.items(), response.content
    )
    assert isinstance(result, vc.LocationResult)
    return result


async def test_ids_start_above_2_to_the_32_and_increase(client: httpx.AsyncClient) -> None:
    assert [await send(client), await send(client)] == [FIRST_ID, FIRST_ID + 1]


@pytest.mark.parametrize(
    ("phone", "question", "error"),
    [
        ("555123", "Ok?", "Invalid PhoneNumber: it must be 7 to 15 digits."),
        ("5551234567890123", "Ok?", "Invalid PhoneNumber: it must be 7 to 15 digits."),
        ("555-123-4567", "Ok?", "Invalid PhoneNumber: it must be 7 to 15 digits."),
        (
            "\u0665\u0665\u0665\u0661\u0662\u0663\u0664",
            "Ok?",
            "Invalid PhoneNumber: it must be 7 to 15 digits.",
        ),
        ("5551234567", "", "ConfirmationQuestion is required."),
        ("5551234567", "   ", "ConfirmationQuestion is required."),
        ("5551234567", "x" * 201, "ConfirmationQuestion must be 200 characters or fewer."),
        # An emoji is two UTF-16 code units: 199 + 2 = 201.
        (
            "5551234567",
            "x" * 199 + "\U0001f600",
            "ConfirmationQuestion must be 200 characters or fewer.",
        ),
    ],
)
async def test_invalid_sms_requests_get_id_0_and_an_error_message(
    client: httpx.AsyncClient, phone: str, question: str, error: str
) -> None:
    response = await soap(client, SEND, {"PhoneNumber": phone, "ConfirmationQuestion": question})
    assert response.status_code == 200
    root = xml(response)
    assert root.findtext(f".//{{{NS}}}SecureLinkRequestId") == "0"
    assert root.findtext(f".//{{{NS}}}ErrorMessage") == error


async def test_question_of_exactly_200_code_units_is_accepted(client: httpx.AsyncClient) -> None:
    assert await send(client, question="x" * 198 + "\U0001f600") == FIRST_ID
    assert await send(client, question="\u00e9" * 200) == FIRST_ID + 1


async def test_default_script_pending_for_two_polls_then_verified_and_located(
    client: httpx.AsyncClient,
) -> None:
    request_id = await send(client)
    assert [await verified(client, request_id) for _ in range(4)] == [None, None, True, True]
    pending = await location(client, request_id)
    assert pending.pending
    assert pending.error_message == "Location not available for this SecureLink RequestID"
    assert (await location(client, request_id)).pending
    shared = await location(client, request_id)
    assert shared.location is not None
    assert shared.location.city == "Austin"


async def test_scripts_by_phone_and_by_id() -> None:
    sim, http = make()
    async with http:
        sim.script_for(
            "5550000001",
            Script(answer="declined", pending_polls=0, location="denied", location_pending_polls=0),
        )
        sim.script_for("5550000002", Script(answer="never", location="never"))
        declined = await send(http, "5550000001")
        never = await send(http, "5550000002")
        assert await verified(http, declined) is False
        assert (await location(http, declined)).pending  # denied looks like pending on the wire
        assert sim.secure_link(declined).location_state == "denied"
        assert [await verified(http, never) for _ in range(20)] == [None] * 20
        sim.script_for(never, Script(pending_polls=0))
        assert await verified(http, never) is True
        with pytest.raises(KeyError):
            sim.script_for(12345, Script())


async def test_pending_for_a_duration_uses_the_injected_clock() -> None:
    clock = FakeClock()
    config = SimulatorConfig(
        script=Script(pending_seconds=30, location_pending_seconds=60), clock=clock
    )
    sim, http = make(config)
    async with http:
        request_id = await send(http)
        assert [await verified(http, request_id) for _ in range(5)] == [None] * 5
        clock.now += 30
        assert await verified(http, request_id) is True
        assert (await location(http, request_id)).pending
        clock.now += 30
        assert (await location(http, request_id)).location is not None
        assert sim.secure_link(request_id).verification_polls == 6


async def test_direct_control_overrides_the_script() -> None:
    sim, http = make(SimulatorConfig(script=Script.manual()))
    async with http:
        first, second = await send(http), await send(http)
        assert await verified(http, first) is None
        sim.verify(first)
        sim.decline(second)
        assert (await verified(http, first), await verified(http, second)) == (True, False)
        place = vc.Location(latitude=48.8566, longitude=2.3522, country="FR")
        sim.share_location(first, place)
        assert (await location(http, first)).location == place
        sim.deny_location(first)
        assert (await location(http, first)).pending
        assert [link.request_id for link in sim.secure_links] == [first, second]
        assert sim.secure_link(first).question == "Ok?"
        with pytest.raises(KeyError):
            sim.verify(1)


async def test_unknown_request_ids_say_so(client: httpx.AsyncClient) -> None:
    for request_id in ("0", "1", "-5", str(2**63 - 1)):
        response = await client.get(f"{EP}/{LOCATION}", params={"RequestId": request_id})
        result = vc.codec_for("http-get").decode(LOCATION, 200, (), response.content)
        assert result == vc.LocationResult(None, "Invalid SecureLink RequestID")


async def test_consent_revocation_and_recording() -> None:
    sim, http = make()
    async with http:

        async def revoke(number: str) -> str | None:
            response = await http.get(f"{EP}/{REVOKE}", params={"MobileNumber": number})
            return xml(response).text

        assert await revoke("5551234567") == "true"
        assert await revoke("5551234567") == "false"
        assert not sim.has_consent("5551234567")
        sim.record_consent("5551234567")
        assert await revoke("5551234567") == "true"
        assert await revoke("not-a-number") == "false"
    strict, http = make(SimulatorConfig(consent_by_default=False))
    async with http:
        assert (await soap(http, REVOKE, {"MobileNumber": "5551234567"})).content.count(
            b">false<"
        ) == 1
        strict.record_consent("5551234567")
        assert (await soap(http, REVOKE, {"MobileNumber": "5551234567"})).content.count(
            b">true<"
        ) == 1


async def test_consent_text_has_xml_specials_and_non_ascii(client: httpx.AsyncClient) -> None:
    response = await client.get(f"{EP}/GetMobileConsentText")
    text = xml(response).text or ""
    assert {"&", "<", ">"} <= set(text)
    assert any(ord(char) > 0xFFFF for char in text)
    assert b"&amp;" in response.content
    assert b"&lt;" in response.content


async def test_bad_checks_exist_only_when_configured() -> None:
    sim, http = make(SimulatorConfig(bad_checks={7: "old"}))
    async with http:

        async def update(bad_check_id: str, reason: str) -> str | None:
            form = {"BadCheckId": bad_check_id, "CheckRejectReason": reason}
            return xml(await http.post(f"{EP}/{UPDATE}", data=form)).text

        assert await update("7", "NSF") == "true"
        assert sim.bad_checks == {7: "NSF"}
        assert await update("8", "NSF") == "false"
        sim.bad_checks[8] = ""
        assert await update("8", "Closed") == "true"


# -- the request log ------------------------------------------------------------


async def test_the_log_records_what_each_binding_sent() -> None:
    sim, http = make()
    async with http:
        request_id = await send(http)
        await soap(http, VERIFIED, {"RequestId": str(request_id)}, version="1.2")
        await http.get(f"{EP}/{VERIFIED}", params={"RequestId": str(request_id)})
        await http.post(f"{EP}/{LOCATION}", data={"RequestId": str(request_id)})
    first, second, third, fourth = sim.requests
    assert (first.operation, first.binding, first.soap_action) == (SEND, "soap11", f'"{NS}/{SEND}"')
    assert first.params == {"PhoneNumber": "5551234567", "ConfirmationQuestion": "Ok?"}
    assert (first.credentials_present, first.username, first.status) == (True, "user", 200)
    assert (second.binding, second.soap_action) == ("soap12", None)
    assert second.params == {"RequestId": str(request_id)}  # the long, as text
    assert (third.binding, third.method, third.credentials_present) == ("http-get", "GET", False)
    assert (fourth.binding, fourth.content_type) == (
        "http-post",
        "application/x-www-form-urlencoded",
    )
    assert not any(req.dropped for req in sim.requests)
    assert "pass" not in repr(sim.requests)
    assert len(sim.calls(SEND)) == 1
    sim.reset_log()
    assert sim.requests == []


async def test_errors_are_logged_with_their_status(client: httpx.AsyncClient) -> None:
    sim = Simulator(credentials=("user", "pass"))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=sim), base_url="http://s"
    ) as http:
        await soap(http, SEND, {}, action="urn:x")
        await soap(http, SEND, {}, credentials=None)
        await http.get(f"{EP}/{VERIFIED}")
        await http.get(f"{EP}/Nope")
        await http.get(f"{EP}?WSDL")  # not an operation call: not logged
    assert [(req.operation, req.status) for req in sim.requests] == [
        (None, 500),
        (SEND, 200),
        (VERIFIED, 500),
        (None, 500),
    ]
    assert sim.requests[1].credentials_present is False
