"""What a pool writes before a request's body: its request line and headers.

Checked once per request shape against header injection (RFC 9110 tokens; a
target and header values of visible ASCII, without controls or line
breaks: nothing can be smuggled into the request), then cached.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Final
from urllib.parse import SplitResult, unquote

from .._codec import HTTPRequest
from .._inflate import ACCEPT_ENCODING
from . import SendError, _parse
from ._proxy import Proxy
from ._spliced import IdRequests, id_requests

_USER_AGENT: Final = "verif-client"
_HEADS_CACHED: Final = 64
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TARGET: Final = re.compile(r"/[\x21-\x7e]*")
_VALUE: Final = re.compile(r"[\x20-\x7e]*")
_VISIBLE: Final = re.compile(r"[\x21-\x7e]*")


class RequestHeads:
    """The heads of one pool's requests (its origin, directly or through a
    plain-HTTP proxy). ``problem``: why no request can be written (the
    proxy's absolute form would not fit in a request line), or None."""

    __slots__ = ("_authority", "_heads", "_own_headers", "_path_from", "_target_start", "problem")

    def __init__(self, parts: SplitResult, proxy: Proxy | None, *, tls: bool) -> None:
        self._authority = parts.netloc.rpartition("@")[2]
        # Credentials in the URL go as HTTP Basic, as httpx sent them before the pool.
        basic: tuple[tuple[str, str], ...] = ()
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            token = base64.b64encode(pair.encode("utf-8")).decode("ascii")
            basic = (("Authorization", f"Basic {token}"),)
        plain_proxy = proxy is not None and not tls
        # Plain HTTP through a proxy names the whole URL (absolute form); the
        # path part is checked from where the origin form would begin.
        absolute = f"http://{self._authority}" if plain_proxy else ""
        self.problem = (
            None
            if _VISIBLE.fullmatch(absolute)
            else f"InvalidURL: {absolute!r} cannot go in a request line"
        )
        self._target_start = absolute + parts.path.rstrip("/")
        self._path_from = len(absolute)
        # Ours, after the request's: the API's Basic credentials, the proxy's.
        self._own_headers = (*basic, *(proxy.headers if proxy and plain_proxy else ()))
        self._heads: dict[tuple[str, str, tuple[tuple[str, str], ...]], bytes] = {}

    @property
    def authority(self) -> str:
        return self._authority

    def request_bytes(self, answer: _parse.Reader, request: HTTPRequest) -> bytes:
        """The whole request, ``answer`` told to read its answer next."""
        head = self.head_of(request)
        answer.start(request.method)
        body = request.body
        if body or request.method not in ("GET", "HEAD"):
            return b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)
        return head + b"\r\n"

    def head_of(self, request: HTTPRequest) -> bytes:
        """The request line and headers (without Content-Length)."""
        key = (request.method, request.path, request.headers)
        head = self._heads.get(key)
        if head is None:
            head = self._head(request)
            # SOAP and POST requests have a handful of shapes; GET paths carry
            # the parameters, so the cache stops growing rather than hold them all.
            if len(self._heads) < _HEADS_CACHED:
                self._heads[key] = head
        return head

    def id_requests(self, encode: Callable[[int], HTTPRequest]) -> IdRequests | None:
        """The requests ``encode`` makes of an id, as written here, prebuilt
        (see _spliced); None if the id cannot be spliced in."""
        return id_requests(encode, self.head_of)

    def _head(self, request: HTTPRequest) -> bytes:
        """The request line and headers, checked once per shape."""
        target = self._target_start + request.path
        headers = [
            ("Host", self._authority),
            *request.headers,
            ("Accept-Encoding", ACCEPT_ENCODING),
            ("User-Agent", _USER_AGENT),
            *self._own_headers,
        ]
        problem = None
        if not _TOKEN.fullmatch(request.method) or not _TARGET.fullmatch(target, self._path_from):
            problem = f"request line {request.method} {target!r}"
        for name, value in headers:
            if not _TOKEN.fullmatch(name) or not _VALUE.fullmatch(value):
                problem = f"header {name!r}"
        if problem is not None:
            raise SendError(f"LocalProtocolError: illegal {problem}", never_sent=True)
        lines = [f"{request.method} {target} HTTP/1.1"]
        lines.extend(f"{name}: {value}" for name, value in headers)
        return ("\r\n".join(lines) + "\r\n").encode("ascii")
