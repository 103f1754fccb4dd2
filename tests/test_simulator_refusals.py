"""Where the real ASMX stack refuses, the simulator refuses the same way (issue 29).

Each test states the answer of the real stack (the ASMX host with the
service's class compiled by ASP.NET): status, content type, fault code and the
first words of the message. Requests are written by hand (raw httpx or raw
bytes on a socket), never by the client's codecs.
"""

from __future__ import annotations

from urllib.parse import quote

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
    client_fixture,  # noqa: F401 (the fixtures "sim" and "client")
    envelope,
    fault_text,
    raw_client,
    raw_exchange,
    sim_fixture,  # noqa: F401
    soap,
    xml,
)

from verif_client.simulator import Simulator, SimulatorConfig, serve
from verif_client.simulator._asmx import MAX_QUERY_LENGTH, MAX_REQUEST_BYTES

pytestmark = pytest.mark.anyio

XML_UTF8 = "text/xml; charset=utf-8"
SOAP12_UTF8 = "application/soap+xml; charset=utf-8"
SEND_ACTION = f'"{NS}/{SEND}"'
CREDENTIALS_FAILURE = b"Error Message: Invalid API Credentials"


def request_id(response: httpx.Response) -> int:
    found = xml(response).findtext(f".//{{{NS}}}SecureLinkRequestId")
    assert found is not None, response.content
    return int(found)


def error_message(response: httpx.Response) -> str | None:
    return xml(response).findtext(f".//{{{NS}}}ErrorMessage")


# -- where the real stack refuses and the simulator used to answer 200 ----------


@pytest.mark.parametrize("action", ['""', ""])
async def test_an_empty_soapaction_names_no_operation(
    client: httpx.AsyncClient, action: str
) -> None:
    # Real stack: 500 text/xml soap:Client "Server did not recognize the value of
    # HTTP Header SOAPAction: ." (only an absent header routes on the body).
    response = await soap(client, SEND, SMS, action=action)
    assert response.status_code == 500
    assert response.headers["content-type"] == XML_UTF8
    assert fault_text(response) == (
        "soap:Client",
        "Server did not recognize the value of HTTP Header SOAPAction: .",
    )


async def test_a_soap11_envelope_sent_as_soap12_is_415(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    # Real stack: 415, no body (a SOAP 1.2 envelope as text/xml stays accepted).
    response = await client.post(
        EP, headers={"Content-Type": SOAP12_UTF8}, content=envelope(SEND, SMS)
    )
    assert response.status_code == 415
    assert response.content == b""
    assert sim.secure_links == []


async def test_a_query_over_2048_characters_is_400(client: httpx.AsyncClient) -> None:
    # Real stack (maxQueryStringLength): 400 text/html "The length of the query
    # string for this request exceeds the configured maxQueryStringLength value."
    query = f"PhoneNumber=5551234567&ConfirmationQuestion={quote('Ok?')}&pad="
    at_limit = query + "x" * (MAX_QUERY_LENGTH - len(query))
    assert (await client.get(f"{EP}/{SEND}?{at_limit}")).status_code == 200
    response = await client.get(f"{EP}/{SEND}?{at_limit}x")
    assert response.status_code == 400
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert (
        "The length of the query string for this request exceeds the configured "
        "maxQueryStringLength value." in response.text
    )


@pytest.mark.parametrize("path", [EP, f"{EP}/{SEND}"])
async def test_two_content_type_headers_are_415(
    client: httpx.AsyncClient, sim: Simulator, path: str
) -> None:
    # Real stack: 415, no body, for SOAP and for HTTP POST.
    soap_call = path == EP
    media = XML_UTF8 if soap_call else "application/x-www-form-urlencoded"
    headers = [("Content-Type", media), ("Content-Type", media)]
    if soap_call:
        headers.append(("SOAPAction", SEND_ACTION))
    body = envelope(SEND, SMS) if soap_call else b"PhoneNumber=5551234567&ConfirmationQuestion=Ok"
    response = await client.post(path, headers=headers, content=body)
    assert response.status_code == 415
    assert response.content == b""
    assert sim.secure_links == []


def _header_after_body(version: str) -> bytes:
    env = SOAP11 if version == "1.1" else SOAP12
    return (
        f'<soap:Envelope xmlns:soap="{env}"><soap:Body><{SEND} xmlns="{NS}">'
        f"<PhoneNumber>5551234567</PhoneNumber><ConfirmationQuestion>Ok?</ConfirmationQuestion>"
        f'</{SEND}></soap:Body><soap:Header><AuthenticationHeader xmlns="{NS}">'
        "<ApiUsername>user</ApiUsername><ApiPassword>pass</ApiPassword>"
        "</AuthenticationHeader></soap:Header></soap:Envelope>"
    ).encode()


@pytest.mark.parametrize("version", ["1.1", "1.2"])
async def test_a_header_after_the_body_is_not_read(version: str) -> None:
    # Real stack: the header is never read, so no credentials: 401 (text/html,
    # IIS's "401 - Unauthorized") where credential failures are HTTP 401.
    sim = Simulator(
        credentials=("user", "pass"), config=SimulatorConfig(credential_failure="http-401")
    )
    async with raw_client(sim, "in-process") as client:
        response = await soap(client, SEND, version=version, body=_header_after_body(version))
    assert response.status_code == 401
    assert response.headers["content-type"] == "text/html"
    assert "401 - Unauthorized" in response.text
    assert sim.secure_links == []
    assert sim.requests[-1].credentials_present is False
    # With the default knob it is the service's plain credentials message.
    async with raw_client(Simulator(credentials=("user", "pass")), "in-process") as client:
        plain = await soap(client, SEND, version=version, body=_header_after_body(version))
    assert (plain.status_code, plain.content) == (200, CREDENTIALS_FAILURE)


async def test_a_soap_post_to_the_endpoint_with_a_slash_is_500(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    # Real stack: 500 text/plain "System.InvalidOperationException: Request format
    # is unrecognized for URL unexpectedly ending in '/'."
    response = await client.post(
        EP + "/",
        headers={"Content-Type": XML_UTF8, "SOAPAction": SEND_ACTION},
        content=envelope(SEND, SMS),
    )
    assert response.status_code == 500
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text.startswith(
        "System.InvalidOperationException: Request format is unrecognized for URL "
        "unexpectedly ending in '/'."
    )
    assert sim.secure_links == []


def _no_declaration(question: str) -> bytes:
    return envelope(SEND, {"PhoneNumber": "5551234567", "ConfirmationQuestion": question}).split(
        b"?>", 1
    )[1]


def _raw_post(content_type: str, body: bytes, *extra: str) -> bytes:
    """A SOAP POST as a user writes it by hand, to be closed after its answer."""
    head = "".join(
        f"{line}\r\n"
        for line in (
            f"POST {EP} HTTP/1.1",
            "Host: 127.0.0.1",
            f"Content-Type: {content_type}",
            *extra,
            f"Content-Length: {len(body)}",
            "Connection: close",
        )
    )
    return f"{head}\r\n".encode() + body


async def test_the_header_charset_wins_over_the_bytes(client: httpx.AsyncClient) -> None:
    # Real stack: UTF-8 bytes labelled iso-8859-1 (no XML declaration) are read as
    # Latin-1, so 101 "é" are 202 characters: 200 with the service's length message.
    question = "\N{LATIN SMALL LETTER E WITH ACUTE}" * 101
    body = _no_declaration(question)
    headers = {"Content-Type": "text/xml; charset=iso-8859-1", "SOAPAction": SEND_ACTION}
    refused = await client.post(EP, headers=headers, content=body)
    assert refused.status_code == 200
    assert error_message(refused) == "ConfirmationQuestion must be 200 characters or fewer."
    assert request_id(refused) == 0
    # ASMX reads through a StreamReader of the header's charset: an XML declaration
    # saying utf-8 does not change that; only a byte order mark does.
    declared = b'<?xml version="1.0" encoding="utf-8"?>' + body
    assert request_id(await client.post(EP, headers=headers, content=declared)) == 0
    with_bom = b"\xef\xbb\xbf" + body
    assert request_id(await client.post(EP, headers=headers, content=with_bom)) > 0
    # Labelled utf-8 the same bytes are 101 characters, within the limit, whatever
    # the declaration says.
    headers["Content-Type"] = XML_UTF8
    taken = await client.post(EP, headers=headers, content=body)
    assert request_id(taken) > 0
    latin = b"<?xml version='1.0' encoding='iso-8859-1'?>" + body
    assert request_id(await client.post(EP, headers=headers, content=latin)) > 0


@pytest.mark.parametrize(
    "charset", ["iso-8859-1", "ISO-8859-1", '"iso-8859-1"', "'iso-8859-1'", "\tiso-8859-1 "]
)
async def test_a_raw_post_labelled_latin1_is_read_as_latin1(charset: str) -> None:
    # Real stack (issue 39): UTF-8 bytes labelled text/xml; charset=iso-8859-1, no
    # XML declaration, over a socket: 101 "é" are 202 characters, and the send is
    # refused with the service's length message. ASP.NET reads the charset as it
    # reads any Content-Type parameter: quotes, single or double, spaces and tabs
    # trimmed.
    question = "\N{LATIN SMALL LETTER E WITH ACUTE}" * 101
    sim = Simulator(credentials=("user", "pass"))
    content_type = f"text/xml; charset={charset}"
    async with serve(sim) as server:
        status, _, body = await raw_exchange(
            server.port,
            _raw_post(content_type, _no_declaration(question), f"SOAPAction: {SEND_ACTION}"),
        )
        assert status == 200
        answer = httpx.Response(status, content=body)
        assert error_message(answer) == "ConfirmationQuestion must be 200 characters or fewer."
        assert request_id(answer) == 0
        assert sim.secure_links == []
        # Labelled UTF-8, the same bytes are 101 characters, and taken.
        status, _, body = await raw_exchange(
            server.port,
            _raw_post(XML_UTF8, _no_declaration(question), f"SOAPAction: {SEND_ACTION}"),
        )
    assert request_id(httpx.Response(status, content=body)) > 0
    assert [link.question for link in sim.secure_links] == [question]


# -- credentials: the service answers a call without them as wrong ones ---------


@pytest.mark.parametrize("version", ["1.1", "1.2"])
@pytest.mark.parametrize("credentials", [None, ("", ""), ("user", ""), ("", "pass")])
async def test_by_default_missing_or_empty_credentials_are_refused(
    version: str, credentials: tuple[str, str] | None
) -> None:
    # Real service: 200 text/xml "Error Message: Invalid API Credentials".
    sim = Simulator()
    async with raw_client(sim, "in-process") as client:
        refused = await soap(client, SEND, SMS, version=version, credentials=credentials)
        taken = await soap(client, SEND, SMS, version=version, credentials=("any", "thing"))
    assert (refused.status_code, refused.headers["content-type"]) == (200, "text/xml")
    assert refused.content == CREDENTIALS_FAILURE
    assert request_id(taken) > 0
    assert len(sim.secure_links) == 1


async def test_accept_any_credentials_lets_everything_through() -> None:
    sim = Simulator(accept_any_credentials=True)
    async with raw_client(sim, "in-process") as client:
        for credentials in (None, ("", ""), ("a", "b")):
            assert request_id(await soap(client, SEND, SMS, credentials=credentials)) > 0
    assert [req.credentials_present for req in sim.requests] == [False, True, True]
    with pytest.raises(ValueError, match="not both"):
        Simulator(credentials=("a", "b"), accept_any_credentials=True)


async def test_http_get_and_post_need_no_credentials() -> None:
    async with raw_client(Simulator(), "in-process") as client:
        assert (await client.get(f"{EP}/{CONSENT}")).status_code == 200
        assert (await client.post(f"{EP}/{CONSENT}")).status_code == 200


# -- where the simulator was stricter than the real stack -----------------------


async def test_an_oversized_header_is_answered_400() -> None:
    # Real stack (HTTP.sys): "HTTP/1.1 400 Bad Request", text/html, then the close.
    big = "a" * 20000
    async with serve(Simulator()) as server:
        _, head, body = await raw_exchange(
            server.port,
            f"GET {EP}/{CONSENT} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: {big}\r\n\r\n".encode(),
        )
    assert head.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"content-type: text/html; charset=us-ascii" in head.lower()
    assert b"<TITLE>Bad Request</TITLE>" in body
    assert b"The size of the request headers is too long." in body


async def test_raw_non_ascii_bytes_in_a_query_are_taken() -> None:
    # Real stack: 200, the bytes read as UTF-8.
    sim = Simulator()
    question = "Caf\N{LATIN SMALL LETTER E WITH ACUTE}-ok?"
    target = f"{EP}/{SEND}?PhoneNumber=5551234567&ConfirmationQuestion={question}"
    async with serve(sim) as server:
        status, _, _ = await raw_exchange(
            server.port,
            f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode(),
        )
    assert status == 200
    assert [link.question for link in sim.secure_links] == [question]


async def test_a_url_encoded_soapaction_is_decoded(client: httpx.AsyncClient) -> None:
    # Real stack: 200 (the header is URL-decoded before it is matched).
    response = await soap(client, SEND, SMS, action=f'"{quote(f"{NS}/{SEND}", safe="")}"')
    assert response.status_code == 200
    assert request_id(response) > 0


async def test_an_invalid_utf8_byte_becomes_a_replacement_character(
    client: httpx.AsyncClient, sim: Simulator
) -> None:
    # Real stack: 200, the byte read as U+FFFD.
    body = envelope(SEND, {"PhoneNumber": "5551234567", "ConfirmationQuestion": "Ok\xff?"})
    body = body.replace("Ok\xff?".encode(), b"Ok\xff?")
    response = await soap(client, SEND, body=body, credentials=("user", "pass"))
    assert response.status_code == 200
    assert request_id(response) > 0
    assert sim.secure_links[0].question == "Ok\N{REPLACEMENT CHARACTER}?"


@pytest.mark.parametrize(("version", "code"), [("1.1", "soap:Server"), ("1.2", "soap:Receiver")])
async def test_a_body_over_the_request_limit_is_a_server_fault(
    client: httpx.AsyncClient, version: str, code: str
) -> None:
    # Real stack: 500 and a SOAP fault soap:Server (1.2: soap:Receiver) "Server was
    # unable to process request. ---> Maximum request length exceeded."
    padding = "x" * MAX_REQUEST_BYTES
    body = envelope(SEND, SMS, version=version).replace(
        b"<soap:Body>", f"<!--{padding}-->".encode() + b"<soap:Body>"
    )
    response = await soap(client, SEND, version=version, body=body)
    assert response.status_code == 500
    assert response.headers["content-type"] == (XML_UTF8 if version == "1.1" else SOAP12_UTF8)
    assert fault_text(response) == (
        code,
        "Server was unable to process request. ---> Maximum request length exceeded.",
    )


def _without_body(version: str) -> bytes:
    env = SOAP11 if version == "1.1" else SOAP12
    return (
        f'<soap:Envelope xmlns:soap="{env}"><soap:Header><AuthenticationHeader xmlns="{NS}">'
        "<ApiUsername>user</ApiUsername><ApiPassword>pass</ApiPassword>"
        "</AuthenticationHeader></soap:Header></soap:Envelope>"
    ).encode()


async def test_a_soap12_envelope_without_a_body_is_a_receiver_fault(
    client: httpx.AsyncClient,
) -> None:
    # Real stack: 500 application/soap+xml soap:Receiver "Server was unable to
    # process request. ---> Request format is invalid: Missing required soap:Body
    # element." (routing on the body element finds no body).
    response = await soap(client, SEND, version="1.2", body=_without_body("1.2"))
    assert response.status_code == 500
    assert response.headers["content-type"] == SOAP12_UTF8
    code, reason = fault_text(response)
    assert code == "soap:Receiver"
    assert reason.startswith("Server was unable to process request. ---> Request format is invalid")
    # Routed by an action= it knows, the same (issue 39).
    routed = await client.post(
        EP,
        headers={"Content-Type": f'{SOAP12_UTF8}; action="{NS}/{SEND}"'},
        content=_without_body("1.2"),
    )
    assert (routed.status_code, fault_text(routed)) == (500, (code, reason))
    # SOAP 1.1 routed by its SOAPAction reads the envelope and finds it wanting:
    # 500 text/xml soap:Client "Server was unable to read request. ---> ...".
    soap11 = await soap(client, SEND, body=_without_body("1.1"))
    assert (soap11.status_code, soap11.headers["content-type"]) == (500, XML_UTF8)
    assert fault_text(soap11) == (
        "soap:Client",
        "Server was unable to read request. ---> Request format is invalid: "
        "Missing required soap:Body element.",
    )


async def test_a_raw_soap12_post_routed_by_its_action_without_a_body_is_a_receiver_fault() -> None:
    # Real stack (issue 39): 500 application/soap+xml soap:Receiver "Server was
    # unable to process request. ---> Request format is invalid: Missing required
    # soap:Body element.", the envelope's header notwithstanding.
    sim = Simulator(credentials=("user", "pass"))
    content_type = f'{SOAP12_UTF8}; action="{NS}/{SEND}"'
    async with serve(sim) as server:
        status, head, body = await raw_exchange(
            server.port, _raw_post(content_type, _without_body("1.2"))
        )
    assert status == 500
    assert b"\r\ncontent-type: application/soap+xml; charset=utf-8\r\n" in head.lower() + b"\r\n"
    assert fault_text(httpx.Response(status, content=body)) == (
        "soap:Receiver",
        "Server was unable to process request. ---> Request format is invalid: "
        "Missing required soap:Body element.",
    )
    assert sim.secure_links == []


async def test_a_soap11_document_rooted_at_body_is_a_client_fault(
    client: httpx.AsyncClient,
) -> None:
    # Real stack: 500 text/xml soap:Client "Server was unable to read request. --->
    # Request format is invalid: Missing required soap:Envelope element."
    body = (
        f'<soap:Body xmlns:soap="{SOAP11}"><{SEND} xmlns="{NS}">'
        f"<PhoneNumber>5551234567</PhoneNumber></{SEND}></soap:Body>"
    ).encode()
    response = await soap(client, SEND, body=body)
    assert response.status_code == 500
    assert response.headers["content-type"] == XML_UTF8
    assert fault_text(response) == (
        "soap:Client",
        "Server was unable to read request. ---> Request format is invalid: "
        "Missing required soap:Envelope element.",
    )


@pytest.mark.parametrize("path", ["soap", "bare"])
async def test_a_control_character_is_written_as_a_character_reference(
    client: httpx.AsyncClient, sim: Simulator, path: str
) -> None:
    # Real stack: XmlSerializer writes U+0001 as "&#x1;" (and U+001F as "&#x1F;").
    sim.consent_text = "a\x01b\x1fc\td"
    if path == "soap":
        response = await soap(client, CONSENT)
    else:
        response = await client.get(f"{EP}/{CONSENT}")
    assert response.status_code == 200
    assert b"a&#x1;b&#x1F;c\td" in response.content
    assert b"\x01" not in response.content
