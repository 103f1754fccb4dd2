"""The client's options, checked once, here, when the client is built.

A bad value fails at construction with a ``ValueError`` naming its option,
not later with another library's error (a NaN rate limit would otherwise be
no limit at all, a NaN timeout would never end). What the options imply is
worked out here too, once: the address shown and the one connected to, the
proxy (read from the environment at construction, as httpx does), the client
certificate (loaded now, so that a bad one fails now), and the secrets to
scrub from whatever the service or the network sends back.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urlsplit

import attrs

from ._bindings import codec_for
from ._codec import DEFAULT_MAX_RESPONSE_BYTES, Codec, Credentials
from ._ratelimit import Limiter
from ._retry import DEFAULT_RETRY, RetryPolicy
from ._scrub import NO_SECRETS, Scrubber
from ._service import (
    DEFAULT_NAMESPACE,
    ENDPOINT_PATH,
    SANDBOX_BASE_URL,
    Binding,
    parse_binding,
)
from ._transport import Transport
from ._transport._proxy import Proxy, choose_proxy
from ._transport._tls import CertTypes, ClientCert, trusted_from_environment

if TYPE_CHECKING:
    import httpx

    from . import _hooks

# The pool's cost per request does not grow with its size (docs/performance.md:
# CPU per request is flat from 16 to 1,024 connections), so the default is set
# by latency instead: 100 connections, like poll_verifications' default
# max_concurrency, carry the ~700 polls/s that 10,000 waiting ids need up to a
# service latency of about 140 ms. Idle connections expire after 5 s.
DEFAULT_MAX_CONNECTIONS: Final = 100


def _number(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _check_number(attribute.name, value)


def _integer(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _check_number(attribute.name, value, integer=True)


def _optional_number(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _check_number(attribute.name, value)


@attrs.frozen(kw_only=True, repr=False, eq=False)
class ClientOptions:
    """What ``VerificationClient(...)`` was given, checked, and what follows from it.

    The fields up to ``username_is_secret`` are the constructor's arguments;
    the rest are derived in ``__attrs_post_init__``. The checks run in the
    order of the fields (attrs runs validators in that order), then the
    contradictions and the address: the first wrong option is the one named.
    """

    # -- the arguments, as given (the numbers first: see the class docstring)
    timeout: float = attrs.field(default=30.0, validator=_number)
    max_connections: int = attrs.field(default=DEFAULT_MAX_CONNECTIONS, validator=_integer)
    max_response_bytes: int = attrs.field(default=DEFAULT_MAX_RESPONSE_BYTES, validator=_integer)
    rate_limit: float | None = attrs.field(default=None, validator=_optional_number)
    rate_limiter: Limiter | None = None
    http_client: httpx.AsyncClient | None = None
    transport: httpx.AsyncBaseTransport | Transport | None = None
    proxy: str | None = None
    cert: CertTypes | None = None
    base_url: str
    username: str | None = None
    password: str | None = None
    binding: Binding | str = Binding.SOAP11
    namespace: str = DEFAULT_NAMESPACE
    endpoint_path: str = ENDPOINT_PATH
    retry: RetryPolicy = DEFAULT_RETRY
    validate: bool = True
    verify: bool | ssl.SSLContext = True
    trust_env: bool = True
    hooks: _hooks.Hooks | Sequence[_hooks.Hooks] | None = None
    username_is_secret: bool = False

    # -- derived (not arguments)
    # The address shown (repr, base_url, warnings, hooks): never the
    # credentials a URL may carry; only the connection layer gets them.
    site: str = attrs.field(init=False)
    connect_url: str = attrs.field(init=False)
    chosen_binding: Binding = attrs.field(init=False)
    credentials: Credentials | None = attrs.field(init=False)
    # Read at construction, as httpx does (see _transport._proxy); a client
    # you bring reads its own.
    chosen_proxy: Proxy | None = attrs.field(init=False)
    client_cert: ClientCert | None = attrs.field(init=False)
    trusted: tuple[str | None, str | None] = attrs.field(init=False)
    scrub: Scrubber = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        if self.rate_limit is not None and self.rate_limiter is not None:
            raise ValueError("pass either rate_limit or rate_limiter, not both")
        if self.http_client is not None and self.transport is not None:
            raise ValueError("pass either http_client or transport, not both")
        if not self.own_pool and (self.proxy is not None or self.cert is not None):
            raise ValueError(
                "proxy= and cert= configure the client's own connection pool: give them to "
                "the http_client or transport you pass instead"
            )
        shown, userinfo = _split_userinfo(str(self.base_url))
        site = _site_root(shown, self.endpoint_path)
        connect_url = site
        if userinfo is not None:
            scheme, _, rest = site.partition("://")
            connect_url = f"{scheme}://{userinfo}@{rest}"
        username, password = self.username, self.password
        credentials = (
            Credentials(username or "", password or "")
            if username is not None or password is not None
            else None
        )
        chosen_binding = parse_binding(self.binding)
        proxy = choose_proxy(site, self.proxy, trust_env=self.trust_env) if self.own_pool else None
        cert = ClientCert(self.cert) if self.cert is not None else None
        trusted = (
            trusted_from_environment() if self.trust_env and self.verify is True else (None, None)
        )
        secrets = [
            password or "",
            (username or "") if self.username_is_secret else "",
            *(proxy.secrets if proxy is not None else ()),
            (cert.password or "") if cert is not None else "",
        ]
        if userinfo is not None:
            # An echo of the Authorization header holds the Basic token.
            url_user, _, url_password = (unquote(part) for part in userinfo.partition(":"))
            token = base64.b64encode(f"{url_user}:{url_password}".encode()).decode("ascii")
            secrets += [url_password, token]
        derived = {
            "site": site,
            "connect_url": connect_url,
            "chosen_binding": chosen_binding,
            "credentials": credentials,
            "chosen_proxy": proxy,
            "client_cert": cert,
            "trusted": trusted,
            "scrub": Scrubber(secrets) if any(secrets) else NO_SECRETS,
        }
        for name, value in derived.items():
            # The documented way to set a frozen attrs instance's own fields.
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        # Never the fields: they hold the password, and a URL's credentials.
        return f"<ClientOptions {self.site} binding={self.chosen_binding.value}>"

    def codecs(self) -> dict[Binding, Codec]:
        """A codec per binding, with these options (a call may pick its binding)."""
        return {
            binding: codec_for(
                binding,
                namespace=self.namespace,
                endpoint_path=self.endpoint_path,
                validate=self.validate,
                max_response_bytes=self.max_response_bytes,
            )
            for binding in Binding
        }

    @property
    def own_pool(self) -> bool:
        """Calls go through our own ConnectionPool (no http_client or transport given)."""
        return self.http_client is None and self.transport is None


def _check_number(option: str, value: object, *, integer: bool = False) -> None:
    """Refuse, at construction, an option value that would fail late with
    another library's error or quietly mean something else (a NaN rate is no
    limit at all, a NaN timeout never ends)."""
    kind = "an integer >= 1" if integer else "a number > 0"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise ValueError(f"{option} must be {kind}, got {value!r}")
    if not value > 0:  # also false for NaN
        raise ValueError(f"{option} must be {kind}, got {value!r}")


def _split_userinfo(base_url: str) -> tuple[str, str | None]:
    """``base_url`` without ``user:password@``, and that userinfo (None without).

    Userinfo goes as HTTP Basic on every request, so it is refused over plain
    http, where anyone on the path would read it (SECURITY.md). The refusal
    names neither the URL nor its credentials."""
    scheme, separator, rest = base_url.partition("://")
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    userinfo, at, host = rest[:end].rpartition("@")
    if not separator or not at:
        return base_url, None
    if scheme.lower() != "https":
        raise ValueError(
            "base_url: credentials in the URL (user:password@) would be sent in clear "
            "as HTTP Basic: give an https:// address, or pass username= and password= "
            "(which go in the SOAP header)"
        )
    return f"{scheme}://{host}{rest[end:]}", userinfo


def _site_root(base_url: str, endpoint_path: str) -> str:
    """``base_url`` without a trailing slash, and without the endpoint path
    when it was given the service's full address (it is added per request)."""
    url = base_url.rstrip("/")
    endpoint = endpoint_path.rstrip("/")
    try:
        parsed = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"base_url: {base_url!r} is not a URL ({exc})") from None
    if parsed.query or parsed.fragment:
        raise ValueError(
            f"base_url: {base_url!r} has a query or fragment; give the site's address, "
            f"e.g. {SANDBOX_BASE_URL!r}"
        )
    # IIS matches paths case-insensitively: so does this.
    if endpoint and url.lower().endswith(endpoint.lower()):
        return url[: len(url) - len(endpoint)]
    if parsed.path.lower().rstrip("/").endswith(".asmx"):
        raise ValueError(
            f"base_url: {base_url!r} ends in a service path other than endpoint_path "
            f"({endpoint_path!r}); give the site's address as base_url and the path as "
            "endpoint_path"
        )
    return url
