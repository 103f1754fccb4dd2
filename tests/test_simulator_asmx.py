"""ASMX behaviour of the simulator, checked with raw HTTP through ASGITransport."""

from __future__ import annotations

import httpx
import pytest
from _sim_helpers import (
    CONSENT,
    EP,
    NS,
    SEND,
    SMS,
    SOAP11,
    SOAP12,
    VERIFIED,
    client_fixture,  # noqa: F401 (the fixtures "sim" and "client")
    envelope,
    fault_text,
    sim_fixture,  # noqa: F401
    soap,
    xml,
)

from verif_client.simulator import Simulator, SimulatorConfig

pytestmark = pytest.mark.anyio

TEXT = "text/plain; charset=utf-8"
XSI = "http://www.w3.org/2001/XMLSchema-instance"


# -- SOAP ---------------------------------------------------------------------


@pytest.mark.parametrize("action", ['"urn:wrong"', f'"{NS}/{SEND.lower()}"'])
async def test_soap11_action_is_checked(client: httpx.AsyncClient, action: str) -> None:
    response = await soap(client, SEND, SMS, action=action)
    assert response.status_code == 500
    assert response.headers["content-type"] == "text/xml; charset=utf-8"
    assert response.headers["connection"] == "close"
    code, reason = fault_text(response)
    assert code == "soap:Client"
    assert reason.startswith("Server did not recognize the value of HTTP Header SOAPAction: ")
    assert action.strip('"') in reason


async def test_soap11_without_an_action_is_routed_by_the_body(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    headers = {"Content-Type": "text/xml; charset=utf-8"}
    response = await client.post(EP, headers=headers, content=envelope(SEND, SMS))
    assert response.status_code == 200
    assert xml(response).find(f"{{{SOAP11}}}Body/{{{NS}}}{SEND}Response") is not None
    assert sim.requests[-1].operation == SEND
    unknown = await client.post(EP, headers=headers, content=envelope("Nope", {}))
    assert unknown.status_code == 500
    assert "valid action parameter" in fault_text(unknown)[1]


async def test_soap11_unquoted_action_is_accepted(client: httpx.AsyncClient) -> None:
    response = await soap(client, SEND, SMS, action=f"{NS}/{SEND}")
    assert response.status_code == 200


async def test_soap12_routes_on_the_body_or_the_action_parameter(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    assert (await soap(client, SEND, SMS, version="1.2")).status_code == 200
    ok = await client.post(
        EP,
        headers={"Content-Type": f'application/soap+xml; charset=utf-8; action="{NS}/{SEND}"'},
        content=envelope(SEND, SMS, version="1.2"),
    )
    assert ok.status_code == 200
    # An action it does not know is ignored: the body routes the call.
    unknown_action = await client.post(
        EP,
        headers={"Content-Type": 'application/soap+xml; charset=utf-8; action="urn:x"'},
        content=envelope(SEND, SMS, version="1.2"),
    )
    assert unknown_action.status_code == 200
    assert unknown_action.headers["content-type"] == "application/soap+xml; charset=utf-8"
    unknown = await soap(client, "Nope", {}, version="1.2")
    assert unknown.status_code == 500
    assert "valid action parameter" in fault_text(unknown)[1]
    assert [req.soap_action for req in sim.requests[:2]] == [None, None]


async def test_malformed_soap11_is_http_400_and_soap12_a_receiver_fault(
    client: httpx.AsyncClient,
) -> None:
    response = await soap(client, SEND, body=b"<soap:Envelope><oops")
    assert response.status_code == 400
    assert response.content == b""
    response = await soap(client, SEND, version="1.2", body=b"<soap:Envelope><oops")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/soap+xml; charset=utf-8"
    code, reason = fault_text(response)
    assert code == "soap:Receiver"
    assert reason.startswith("Server was unable to process request.")


async def test_the_envelope_not_the_content_type_says_which_soap(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    # A SOAP 1.2 envelope sent as text/xml with a SOAPAction: answered as SOAP 1.2.
    response = await soap(client, SEND, body=envelope(SEND, SMS, version="1.2"))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/soap+xml; charset=utf-8"
    assert xml(response).find(f"{{{SOAP12}}}Body/{{{NS}}}{SEND}Response") is not None
    assert sim.requests[-1].binding == "soap12"
    # An envelope of neither version is a VersionMismatch.
    other = envelope(SEND, SMS).replace(SOAP11.encode(), b"urn:not-soap")
    mismatch = await soap(client, SEND, body=other)
    assert mismatch.status_code == 500
    code, reason = fault_text(mismatch)
    assert code == "soap:VersionMismatch"
    assert SOAP11 in reason


async def test_wrong_body_element_and_non_numeric_long_fault(client: httpx.AsyncClient) -> None:
    # The action names one operation, the body holds another.
    mismatch = await soap(client, SEND, body=envelope(VERIFIED, {"RequestId": "1"}))
    assert mismatch.status_code == 500
    assert "was not expected" in fault_text(mismatch)[1]
    bad = await soap(client, VERIFIED, {"RequestId": "12x"})
    code, reason = fault_text(bad)
    assert (code, bad.status_code) == ("soap:Client", 500)
    assert reason.startswith("Server was unable to read request.")


async def test_missing_soap_parameters_are_null_not_faults(client: httpx.AsyncClient) -> None:
    response = await soap(client, SEND, {"PhoneNumber": "5551234567"})
    assert response.status_code == 200
    assert b"<SecureLinkRequestId>0</SecureLinkRequestId>" in response.content
    assert b"<ErrorMessage>ConfirmationQuestion is required.</ErrorMessage>" in response.content


@pytest.mark.parametrize("version", ["1.1", "1.2"])
@pytest.mark.parametrize("credentials", [None, ("user", "wrong"), ("other", "pass")])
async def test_wrong_soap_credentials_get_the_plain_message(
    client: httpx.AsyncClient, version: str, credentials: tuple[str, str] | None
) -> None:
    response = await soap(client, SEND, SMS, version=version, credentials=credentials)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/xml"
    assert response.content == b"Error Message: Invalid API Credentials"


async def test_http_401_knob_and_blocked_caller() -> None:
    config = SimulatorConfig(credential_failure="http-401")
    sim = Simulator(credentials=("user", "pass"), config=config)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=sim), base_url="http://s") as c:
        refused = await soap(c, SEND, SMS, credentials=("user", "bad"))
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "text/html"
        assert (
            "<title>401 - Unauthorized: Access is denied due to invalid credentials.</title>"
            in (refused.text)
        )
        assert (await soap(c, SEND, SMS)).status_code == 200
    blocked = Simulator(config=SimulatorConfig(blocked=True))
    transport = httpx.ASGITransport(app=blocked)
    async with httpx.AsyncClient(transport=transport, base_url="http://s") as c:
        for response in (await soap(c, SEND, SMS), await c.get(f"{EP}/{CONSENT}")):
            assert response.status_code == 401
            assert "401 - Unauthorized" in response.text


# -- HTTP GET / POST ----------------------------------------------------------


def assert_asmx_500(response: httpx.Response, first_line: str) -> None:
    assert response.status_code == 500
    assert response.headers["content-type"] == TEXT
    assert response.headers["connection"] == "close"
    lines = response.text.split("\r\n")
    assert lines[0] == first_line
    assert lines[-1].startswith("   at System.")


async def test_get_and_post_missing_parameter(client: httpx.AsyncClient) -> None:
    for response in (
        await client.get(f"{EP}/{VERIFIED}"),
        await client.post(f"{EP}/{VERIFIED}", data={"Other": "1"}),
    ):
        assert_asmx_500(response, "System.InvalidOperationException: Missing parameter: RequestId.")


@pytest.mark.parametrize("value", ["abc", "", "1.5", "9223372036854775808"])
async def test_non_numeric_long_cannot_be_converted(client: httpx.AsyncClient, value: str) -> None:
    response = await client.get(f"{EP}/{VERIFIED}", params={"RequestId": value})
    assert response.status_code == 500
    assert response.headers["content-type"] == TEXT
    assert response.text.startswith(
        f"System.ArgumentException: Cannot convert {value} to System.Int64."
    )


async def test_long_parameter_with_spaces_and_sign_is_accepted(client: httpx.AsyncClient) -> None:
    response = await client.get(f"{EP}/{VERIFIED}", params={"RequestId": " +7 "})
    assert response.status_code == 200


async def test_unknown_method(client: httpx.AsyncClient) -> None:
    for response in (await client.get(f"{EP}/Foo"), await client.post(f"{EP}/Foo")):
        assert_asmx_500(
            response,
            "System.InvalidOperationException: Request format is unrecognized for URL "
            "unexpectedly ending in '/Foo'.",
        )


async def test_post_without_form_content_type(client: httpx.AsyncClient) -> None:
    response = await client.post(f"{EP}/{VERIFIED}", content=b"RequestId=1")
    assert_asmx_500(response, "System.InvalidOperationException: Request format is invalid: .")
    typed = await client.post(
        f"{EP}/{VERIFIED}", content=b"<x/>", headers={"Content-Type": "text/xml"}
    )
    assert typed.text.startswith(
        "System.InvalidOperationException: Request format is invalid: text/xml."
    )
    # Without parameters there is nothing to read, so no Content-Type is needed.
    empty = await client.post(f"{EP}/{CONSENT}")
    assert empty.status_code == 200


@pytest.mark.parametrize(
    "question",
    ["Pay <ACME>?", "a<!b", "</x", "<?x", "x&#60;y", "ask 1<b or more than 30 characters"],
)
async def test_request_validation_refuses_dangerous_values(
    client: httpx.AsyncClient, question: str
) -> None:
    get = await client.get(
        f"{EP}/{SEND}", params={"PhoneNumber": "5551234567", "ConfirmationQuestion": question}
    )
    assert get.status_code == 500
    assert get.headers["content-type"] == TEXT
    first = get.text.split("\r\n")[0]
    assert first.startswith(
        "System.Web.HttpRequestValidationException (0x80004005): A potentially dangerous "
        'Request.QueryString value was detected from the client (ConfirmationQuestion="'
    )
    post = await client.post(
        f"{EP}/{SEND}", data={"PhoneNumber": "5551234567", "ConfirmationQuestion": question}
    )
    assert "A potentially dangerous Request.Form value" in post.text


async def test_harmless_angle_brackets_pass_validation(client: httpx.AsyncClient) -> None:
    response = await client.get(
        f"{EP}/{SEND}",
        params={"PhoneNumber": "5551234567", "ConfirmationQuestion": "1 < 2 & 3 > 2?"},
    )
    assert response.status_code == 200


async def test_validation_excerpt_is_cut_like_aspnet(client: httpx.AsyncClient) -> None:
    question = "0123456789abcdefghij<b>klmnopqrstuvwxyz0123456789"
    response = await client.get(
        f"{EP}/{SEND}", params={"PhoneNumber": "5551234567", "ConfirmationQuestion": question}
    )
    # 10 characters before the '<', 20 from it on, dots where it was cut.
    assert '(ConfirmationQuestion="...abcdefghij<b>klmnopqrstuvwxyz0...").' in response.text


async def test_paths_and_parameter_names_are_case_insensitive_method_names_not(
    client: httpx.AsyncClient,
) -> None:
    upper = EP.replace("verificationservices/v5", "VerificationServices/V5")
    assert (await client.get(f"{upper}/{CONSENT}")).status_code == 200
    response = await client.get(f"{upper}/{VERIFIED}", params={"requestid": "5"})
    assert response.status_code == 200
    assert (await soap(client, SEND, SMS)).status_code == 200
    for wrong in (
        await client.get(f"{upper}/{CONSENT.lower()}"),
        await client.post(f"{EP}/{VERIFIED.upper()}", data={"RequestId": "5"}),
    ):
        assert wrong.status_code == 500
        assert wrong.headers["content-type"] == TEXT
        first = wrong.text.split("\r\n")[0]
        assert first.startswith("System.InvalidOperationException: Web Service method name")
        assert "case sensitive" in first


async def test_the_endpoint_path_twice_is_an_invalid_method_name(client: httpx.AsyncClient) -> None:
    for response in (
        await client.get(f"{EP}{EP}/{CONSENT}"),
        await client.post(
            f"{EP}{EP}", content=envelope(CONSENT), headers={"Content-Type": "text/xml"}
        ),
    ):
        assert_asmx_500(
            response, "System.InvalidOperationException: Web Service method name is not valid."
        )


@pytest.mark.parametrize("version", ["1.1", "1.2"])
@pytest.mark.parametrize("value", ["1", "true"])
async def test_an_unknown_header_that_must_be_understood_is_a_fault(
    client: httpx.AsyncClient, version: str, value: str
) -> None:
    env = SOAP11 if version == "1.1" else SOAP12
    extra = f'<Trace xmlns="urn:x" soap:mustUnderstand="{value}">1</Trace>'
    body = envelope(SEND, SMS, version=version).replace(
        b"<soap:Header>", f"<soap:Header>{extra}".encode()
    )
    response = await soap(client, SEND, version=version, body=body)
    assert response.status_code == 500
    code, reason = fault_text(response)
    assert code == "soap:MustUnderstand"
    assert "Trace" in reason
    # Not marked, marked "0", or on the header the service declares: fine.
    for harmless in (
        '<Trace xmlns="urn:x">1</Trace>',
        '<Trace xmlns="urn:x" soap:mustUnderstand="0">1</Trace>',
    ):
        ok = envelope(SEND, SMS, version=version).replace(
            b"<soap:Header>", f"<soap:Header>{harmless}".encode()
        )
        assert (await soap(client, SEND, version=version, body=ok)).status_code == 200
    declared = envelope(SEND, SMS, version=version).replace(
        b"<AuthenticationHeader ", f'<AuthenticationHeader soap:mustUnderstand="{value}" '.encode()
    )
    assert env
    assert (await soap(client, SEND, version=version, body=declared)).status_code == 200


@pytest.mark.parametrize("version", ["1.1", "1.2"])
async def test_nil_on_a_long_is_a_client_fault_and_on_a_string_a_null(
    client: httpx.AsyncClient, version: str
) -> None:
    nil = f'<RequestId xsi:nil="true" xmlns:xsi="{XSI}" />'
    body = envelope(VERIFIED, {}, version=version).replace(
        f'<{VERIFIED} xmlns="{NS}">'.encode(), f'<{VERIFIED} xmlns="{NS}">{nil}'.encode()
    )
    response = await soap(client, VERIFIED, version=version, body=body)
    assert response.status_code == 500
    code, reason = fault_text(response)
    assert code == ("soap:Client" if version == "1.1" else "soap:Sender")
    assert reason.startswith("Server was unable to read request.")
    assert "non-nullable" in reason
    null_question = envelope(SEND, {"PhoneNumber": "5551234567"}, version=version).replace(
        b"</PhoneNumber>",
        f'</PhoneNumber><ConfirmationQuestion xsi:nil="true" xmlns:xsi="{XSI}" />'.encode(),
    )
    answered = await soap(client, SEND, version=version, body=null_question)
    assert answered.status_code == 200
    assert b"ConfirmationQuestion is required." in answered.content


async def test_repeated_form_values_are_joined_with_commas(client: httpx.AsyncClient) -> None:
    response = await client.get(f"{EP}/{VERIFIED}?RequestId=1&RequestId=2")
    assert "Cannot convert 1,2 to System.Int64." in response.text


async def test_get_and_post_carry_no_credentials_and_are_accepted(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    assert (await client.get(f"{EP}/{CONSENT}")).status_code == 200
    assert (await client.post(f"{EP}/{CONSENT}", data={})).status_code == 200
    assert [req.credentials_present for req in sim.requests] == [False, False]


async def test_other_paths_and_the_help_page(client: httpx.AsyncClient) -> None:
    missing = await client.get("/nope.asmx")
    assert missing.status_code == 404
    assert "404 - File or directory not found." in missing.text
    page = await client.get(EP)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert SEND in page.text
    wrong_type = await client.post(EP, content=b"{}", headers={"Content-Type": "application/json"})
    assert wrong_type.status_code == 500
    assert wrong_type.text.startswith("System.InvalidOperationException: Request format is invalid")


@pytest.mark.parametrize("query", ["?WSDL", "?wsdl", "?Wsdl"])
async def test_wsdl_is_served(client: httpx.AsyncClient, query: str) -> None:
    response = await client.get(EP + query)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/xml; charset=utf-8"
    root = xml(response)
    assert root.tag == "{http://schemas.xmlsoap.org/wsdl/}definitions"
    address = root.find(".//{http://schemas.xmlsoap.org/wsdl/soap/}address")
    assert address is not None
    assert address.get("location") == str(client.base_url).rstrip("/") + EP
