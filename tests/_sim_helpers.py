"""Raw-HTTP helpers for the simulator tests: requests written by hand, not by our codecs."""

from __future__ import annotations

from collections.abc import Mapping

import httpx
from lxml import etree

NS = "http://api.giact.com/verificationservices/v5"
EP = "/verificationservices/v5/InquiriesWS-5-8.asmx"
SOAP11 = "http://schemas.xmlsoap.org/soap/envelope/"
SOAP12 = "http://www.w3.org/2003/05/soap-envelope"
SEND = "SecureLink_Confirmation_SendRequestViaSms"
VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"
LOCATION = "SecureLink_MobileLocation_GetResult"
UPDATE = "UpdatePrivateBadCheckRejectReason"
REVOKE = "RevokeMobileConsent"
CONSENT = "GetMobileConsentText"


def envelope(
    operation: str,
    params: Mapping[str, str] | None = None,
    *,
    version: str = "1.1",
    credentials: tuple[str, str] | None = ("user", "pass"),
    namespace: str = NS,
) -> bytes:
    env = SOAP11 if version == "1.1" else SOAP12
    header = ""
    if credentials is not None:
        header = (
            f'<soap:Header><AuthenticationHeader xmlns="{namespace}">'
            f"<ApiUsername>{credentials[0]}</ApiUsername>"
            f"<ApiPassword>{credentials[1]}</ApiPassword></AuthenticationHeader></soap:Header>"
        )
    children = "".join(f"<{k}>{v}</{k}>" for k, v in (params or {}).items())
    return (
        f'<?xml version="1.0" encoding="utf-8"?><soap:Envelope xmlns:soap="{env}">{header}'
        f'<soap:Body><{operation} xmlns="{namespace}">{children}</{operation}></soap:Body>'
        "</soap:Envelope>"
    ).encode()


async def soap(
    client: httpx.AsyncClient,
    operation: str,
    params: Mapping[str, str] | None = None,
    *,
    version: str = "1.1",
    credentials: tuple[str, str] | None = ("user", "pass"),
    action: str | None = None,
    body: bytes | None = None,
) -> httpx.Response:
    if version == "1.1":
        headers = {
            "Content-Type": "text/xml; charset=utf-8",
            "SOAPAction": action if action is not None else f'"{NS}/{operation}"',
        }
    else:
        headers = {"Content-Type": "application/soap+xml; charset=utf-8"}
    content = (
        body
        if body is not None
        else envelope(operation, params, version=version, credentials=credentials)
    )
    return await client.post(EP, headers=headers, content=content)


def c14n(data: bytes | str, *, strip: bool = False) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    parser = etree.XMLParser(remove_blank_text=strip)
    return etree.tostring(etree.fromstring(raw, parser), method="c14n2", strip_text=strip)


def xml(response: httpx.Response) -> etree._Element:
    return etree.fromstring(response.content)
