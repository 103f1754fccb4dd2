"""The three ways of polling HasBeenVerified for many ids that are compared.

Each contender polls every id with zero delay between polls until it reads
``Verified`` true, with at most ``concurrency`` requests in flight, and returns
the number of polls it made. All three take any httpx async transport (a
MockTransport, an ASGITransport over the simulator, or the default socket
pool), so they are measured over the same bytes. SOAP 1.1 throughout: zeep's
AsyncClient cannot use the HTTP GET/POST bindings.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final

import httpx
from lxml import etree

from verif_client import (
    DEFAULT_NAMESPACE,
    ENDPOINT_PATH,
    PollPolicy,
    PollStatus,
    VerificationClient,
)

from . import workload

Contender = Callable[..., Awaitable[int]]
ZERO_DELAYS: Final = PollPolicy(initial_delay=0, max_delay=0, jitter=0, timeout=600)
_VERIFIED_TAG: Final = f"{{{DEFAULT_NAMESPACE}}}Verified"


def _limits(connections: int | None) -> httpx.Limits:
    """httpx's own default pool (100) unless a size is given."""
    if connections is None:
        return httpx.Limits(max_connections=100, max_keepalive_connections=20)
    return httpx.Limits(max_connections=connections, max_keepalive_connections=connections)


async def verif_client_poller(
    ids: Sequence[int],
    base_url: str,
    concurrency: int,
    transport: httpx.AsyncBaseTransport | None = None,
    http_client: httpx.AsyncClient | None = None,
    connections: int | None = None,
    **_: Any,
) -> int:
    polls = 0
    options = {} if connections is None else {"max_connections": connections}
    async with VerificationClient(
        base_url,
        username=workload.USERNAME,
        password=workload.PASSWORD,
        transport=transport,
        http_client=http_client,
        **options,
    ) as client:
        stream = client.poll_verifications(ids, policy=ZERO_DELAYS, max_concurrency=concurrency)
        async with stream as outcomes:
            async for outcome in outcomes:
                assert outcome.status is PollStatus.VERIFIED, outcome
                polls += outcome.attempts
    return polls


async def zeep_poller(
    ids: Sequence[int],
    base_url: str,
    concurrency: int,
    transport: httpx.AsyncBaseTransport | None = None,
    wsdl: str | Path = "",
    connections: int | None = None,
    **_: Any,
) -> int:
    """What a zeep user writes: AsyncClient, asyncio.Semaphore, asyncio.gather."""
    import zeep
    from zeep.proxy import AsyncServiceProxy
    from zeep.transports import AsyncTransport

    http = httpx.AsyncClient(transport=transport, limits=_limits(connections), timeout=30)
    client = zeep.AsyncClient(str(wsdl), transport=AsyncTransport(client=http))
    # AsyncClient.create_service() hands back a sync proxy (zeep 4.3), so the
    # async proxy is built the way AsyncClient.bind() builds it.
    binding = client.wsdl.bindings[f"{{{DEFAULT_NAMESPACE}}}InquiriesWSSoap"]
    service = AsyncServiceProxy(client, binding, address=base_url + ENDPOINT_PATH)
    header = {
        "AuthenticationHeader": {
            "ApiUsername": workload.USERNAME,
            "ApiPassword": workload.PASSWORD,
        }
    }
    semaphore = asyncio.Semaphore(concurrency)

    async def until_verified(request_id: int) -> int:
        polls = 0
        while True:
            async with semaphore:
                result = await service.SecureLink_SecurityCode_HasBeenVerified(
                    RequestId=request_id, _soapheaders=header
                )
            polls += 1
            if result.Verified is True:
                return polls

    try:
        return sum(await asyncio.gather(*(until_verified(i) for i in ids)))
    finally:
        await http.aclose()


async def httpx_lxml_poller(
    ids: Sequence[int],
    base_url: str,
    concurrency: int,
    transport: httpx.AsyncBaseTransport | None = None,
    connections: int | None = None,
    **_: Any,
) -> int:
    """The least a hand-written client does: a template, a POST, one parse."""
    url = base_url + ENDPOINT_PATH
    template, headers = workload.HAND_TEMPLATE, workload.HAND_HEADERS
    queue = deque(ids)
    polls = 0
    async with httpx.AsyncClient(
        transport=transport, limits=_limits(connections), timeout=30
    ) as http:

        async def worker() -> None:
            nonlocal polls
            while queue:
                request_id = queue.popleft()
                response = await http.post(url, content=template % request_id, headers=headers)
                polls += 1
                verified = etree.fromstring(response.content).find(f".//{_VERIFIED_TAG}")
                if verified is None or verified.text != "true":
                    queue.append(request_id)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return polls


CONTENDERS: Final[dict[str, Contender]] = {
    "verif_client": verif_client_poller,
    "zeep": zeep_poller,
    "httpx+lxml": httpx_lxml_poller,
}
