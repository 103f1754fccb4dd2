"""Raw-HTTP helpers for the simulator tests: requests written by hand, not by our codecs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest
from lxml import etree

from verif_client.simulator import Simulator, serve

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
SMS = {"PhoneNumber": "5551234567", "ConfirmationQuestion": "Ok?"}


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


def fault_text(response: httpx.Response) -> tuple[str, str]:
    """(code, reason) of a 1.1 or 1.2 fault, read with plain lxml."""
    root = xml(response)
    fault = root.find(f"{{{SOAP11}}}Body/{{{SOAP11}}}Fault")
    if fault is not None:
        return fault.findtext("faultcode") or "", fault.findtext("faultstring") or ""
    fault = root.find(f"{{{SOAP12}}}Body/{{{SOAP12}}}Fault")
    assert fault is not None
    code = fault.findtext(f"{{{SOAP12}}}Code/{{{SOAP12}}}Value") or ""
    reason = fault.find(f"{{{SOAP12}}}Reason/{{{SOAP12}}}Text")
    assert reason is not None
    assert reason.get("{http://www.w3.org/XML/1998/namespace}lang") == "en"
    return code, reason.text or ""


@asynccontextmanager
async def raw_client(sim: Simulator, where: str) -> AsyncIterator[httpx.AsyncClient]:
    """A plain httpx client on the simulator: in process (ASGI) or on a loopback port."""
    if where == "in-process":
        transport = httpx.ASGITransport(app=sim)
        async with httpx.AsyncClient(transport=transport, base_url="http://sim") as http:
            yield http
        return
    async with serve(sim) as server, httpx.AsyncClient(base_url=server.base_url) as http:
        yield http


@pytest.fixture(name="sim")
def sim_fixture() -> Simulator:
    """A simulator that takes the SOAP credentials ("user", "pass") only."""
    return Simulator(credentials=("user", "pass"))


@pytest.fixture(name="client", params=["in-process", "loopback"])
async def client_fixture(
    sim: Simulator, request: pytest.FixtureRequest
) -> AsyncIterator[httpx.AsyncClient]:
    """A raw httpx client on ``sim``, once in process and once on a loopback port."""
    async with raw_client(sim, request.param) as http:
        yield http


async def raw_exchange(port: int, data: bytes) -> tuple[int, bytes, bytes]:
    """Bytes written by hand on a socket to 127.0.0.1:port; the answer read until the
    server closes, as (status, head, body)."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(data)
        answer = b""
        with anyio.fail_after(30):
            while True:
                try:
                    answer += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(maxsplit=2)[1]), head, body
