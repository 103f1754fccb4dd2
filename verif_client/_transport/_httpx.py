"""The adapter for what a user brings: an ``httpx.AsyncClient`` or an httpx transport.

Imported only when one is given, so the default path never loads httpx's
client layers. A transport is driven through ``handle_async_request``
directly (no AsyncClient around it); a client always sends with
``follow_redirects=False``, whatever it was built with, so a 307/308 cannot
re-post an envelope (password included) to another host. The attempt's
total deadline applies here too.
"""

from __future__ import annotations

from typing import Final

import anyio
import httpx

from .._codec import HTTPRequest
from .._errors import ResponseTooLargeError
from .._inflate import ACCEPT_ENCODING
from . import Answer, SendError
from ._body import CappedBody, check_declared_length

# Failures after which the request certainly did not reach the service.
_NEVER_SENT: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_ACCEPT: Final = ("Accept-Encoding", ACCEPT_ENCODING)


class HttpxSender:
    """Sends through the user's ``http_client`` or ``transport`` (exactly one)."""

    def __init__(
        self,
        base_url: str,
        *,
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._base_url = base_url
        self._client = http_client
        self._transport = transport
        self._urls: dict[str, httpx.URL] = {}
        self._headers: dict[tuple[str, tuple[tuple[str, str], ...], bool], httpx.Headers] = {}

    async def send(
        self, request: HTTPRequest, *, time_limit: float, max_response_bytes: int, operation: str
    ) -> Answer:
        url = self._url(request.path)
        headers = [*request.headers, ("Accept-Encoding", ACCEPT_ENCODING)]
        answer: Answer | None = None
        try:
            with anyio.move_on_after(time_limit):
                if self._client is not None:
                    built = self._client.build_request(
                        request.method, url, headers=headers, content=request.body
                    )
                    response = await self._client.send(built, stream=True, follow_redirects=False)
                else:
                    assert self._transport is not None
                    built = self._request(request, url, time_limit)
                    response = await self._transport.handle_async_request(built)
                try:
                    body = await _read_capped(response, max_response_bytes, operation)
                finally:
                    await response.aclose()
                answer = (response.status_code, response.headers.multi_items(), body)
        except httpx.TransportError as exc:
            raise SendError(_describe(exc), never_sent=isinstance(exc, _NEVER_SENT)) from None
        if answer is None:
            # What was written is unknown here: the request may have left.
            raise SendError(
                f"Timeout: no complete answer within {time_limit:g} s (one deadline per attempt)",
                never_sent=False,
            )
        return answer

    def _request(
        self, request: HTTPRequest, url: httpx.URL | str, time_limit: float
    ) -> httpx.Request:
        """The ``httpx.Request`` that ``httpx.Request(..., content=body)`` would
        build (Host first, then ours, then Content-Length; the body read), at
        about half the cost: the headers of each request shape are normalised
        once, and a ready stream spares httpx its content encoding."""
        body = request.body
        shape = (request.method, request.headers, not body)
        headers = self._headers.get(shape)
        if headers is None:
            netloc = (url if isinstance(url, httpx.URL) else httpx.URL(url)).netloc
            auto = [("Host", netloc.decode("ascii"))]
            if not body and request.method in ("POST", "PUT", "PATCH"):
                auto.append(("Content-Length", "0"))
            headers = self._headers[shape] = httpx.Headers([*auto, *request.headers, _ACCEPT])
        headers = httpx.Headers(headers)
        if body:
            headers["Content-Length"] = str(len(body))
        built = httpx.Request(
            request.method,
            url,
            headers=headers,
            stream=httpx.ByteStream(body),
            extensions={"timeout": dict.fromkeys(("connect", "read", "write", "pool"), time_limit)},
        )
        built.read()
        return built

    def _url(self, path: str) -> httpx.URL | str:
        # Parsing a URL is a good part of httpx's cost per request. SOAP and POST
        # paths are a handful of constants: parse each once. GET paths carry the
        # parameters, so they are left to httpx.
        if "?" in path:
            return self._base_url + path
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = httpx.URL(self._base_url + path)
        return url

    async def aclose(self) -> None:
        # An injected client is the caller's and stays open; a transport given
        # alone was the client's to close, as when an AsyncClient wrapped it.
        if self._transport is not None:
            await self._transport.aclose()


async def _read_capped(response: httpx.Response, cap: int, operation: str) -> bytes:
    check_declared_length(response.headers.get("content-length"), cap, operation)
    if response.is_stream_consumed:
        # An in-memory transport (httpx.MockTransport) hands the body over
        # already read: nothing is left to stream, only the cap to check.
        content = response.content
        if len(content) > cap:
            raise ResponseTooLargeError(cap, operation=operation)
        return content
    # Raw bytes, inflated here a bounded piece at a time (see _inflate).
    body = CappedBody(response.headers.get("content-encoding", ""), cap, operation)
    async for raw in response.aiter_raw():
        body.feed(raw)
    return body.value()


def _describe(exc: httpx.TransportError) -> str:
    # Some backends raise with an empty message and keep the reason (a
    # certificate failure, say) on the exception they chain from.
    detail = ""
    cause: BaseException | None = exc
    for _ in range(6):
        if cause is None or detail:
            break
        detail = str(cause)
        cause = cause.__cause__ or cause.__context__
    return f"{type(exc).__name__}: {detail or type(exc).__name__}"
