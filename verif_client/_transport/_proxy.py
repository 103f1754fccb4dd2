"""Going through an HTTP proxy: which one (httpx's rules), and the CONNECT tunnel.

The rules are httpx's, so nobody has to learn new ones: an explicit
``proxy=`` wins and ignores the environment; otherwise, unless
``trust_env=False``, ``HTTPS_PROXY`` (or ``HTTP_PROXY`` for an http:// service),
then ``ALL_PROXY``, read at construction, the lower-case name first, and
``NO_PROXY`` (hosts, domains and their subdomains, ``.domain`` for the
subdomains only, ``host:port``, ``*`` for every host; IP addresses and CIDR
networks by value, as curl reads them) turns them off.

HTTPS goes through a ``CONNECT`` tunnel, the TLS inside it made with the
service (its name is the one verified); plain HTTP goes to the proxy in
absolute form. The proxy's password goes only into ``Proxy-Authorization``:
the proxy is shown everywhere else as ``scheme://host:port``.
"""

from __future__ import annotations

import base64
import ipaddress
import os
from collections.abc import Mapping
from typing import Final
from urllib.parse import unquote, urlsplit

import anyio
import anyio.abc
import h11

from .._errors import excerpt
from .._scrub import Scrubber
from . import SendError

_ENVIRONMENT: Final = ("https_proxy", "http_proxy", "all_proxy", "no_proxy")
_READ_SIZE: Final = 4096


class Proxy:
    """One proxy: where to connect, what to show, what to send it."""

    __slots__ = ("headers", "host", "password", "port", "shown")

    def __init__(self, url: str, *, source: str = "proxy") -> None:
        if "://" not in url:
            # What curl and httpx take from the environment: "proxy:3128".
            url = f"http://{url}"
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"{source}: not a proxy URL ({_without_password(url)})") from exc
        if parts.scheme.lower() != "http":
            raise ValueError(
                f"{source}: only http:// proxies are supported, got "
                f"{parts.scheme.lower()}:// ({_without_password(url)})"
            )
        if not parts.hostname:
            raise ValueError(f"{source}: the proxy URL names no host")
        self.host = parts.hostname
        self.port = port or 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.shown = f"http://{host}:{self.port}"
        self.password = unquote(parts.password or "")
        self.headers: tuple[tuple[str, str], ...] = ()
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{self.password}"
            token = base64.b64encode(pair.encode("utf-8")).decode("ascii")
            self.headers = (("Proxy-Authorization", f"Basic {token}"),)

    def __repr__(self) -> str:
        return f"<Proxy {self.shown}>"

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be shown: the password, and the header that carries it."""
        return (self.password, *(value.partition(" ")[2] for _, value in self.headers))


def _without_password(url: str) -> str:
    scheme, _, rest = url.partition("://")
    userinfo, at, hostport = rest.rpartition("@")
    if not at:
        return url
    return f"{scheme}://{userinfo.partition(':')[0]}:***@{hostport}"


def choose_proxy(
    base_url: str,
    proxy: str | None,
    *,
    trust_env: bool,
    environ: Mapping[str, str] | None = None,
) -> Proxy | None:
    """The proxy for ``base_url``: ``proxy`` if given, else the environment's (or None)."""
    if proxy is not None:
        return Proxy(proxy)
    if not trust_env:
        return None
    env = _proxy_environment(os.environ if environ is None else environ)
    parts = urlsplit(base_url)
    scheme = parts.scheme.lower()
    name = "https_proxy" if scheme == "https" else "http_proxy"
    chosen = name if env.get(name) else "all_proxy"
    url = env.get(chosen)
    if not url:
        return None
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        return None  # the pool reports the bad base_url itself
    if bypassed(env.get("no_proxy", ""), parts.hostname or "", port):
        return None
    return Proxy(url, source=chosen.upper())


def _proxy_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The four variables, the lower-case spelling first (an empty one still wins),
    as urllib and so httpx read them."""
    found: dict[str, str] = {}
    for name in _ENVIRONMENT:
        for spelling in (name, name.upper()):
            if spelling in environ:
                found[name] = environ[spelling].strip()
                break
    return found


def bypassed(no_proxy: str, host: str, port: int) -> bool:
    """Whether ``NO_PROXY`` exempts ``host:port``: ``*``, a host or IP, a domain
    (itself and its subdomains), ``.domain`` (subdomains only), each with an
    optional ``:port``; an IP address or network (``10.0.0.0/8``) matches an IP
    host by value only (see docs/client.md for where httpx and curl differ)."""
    host = host.lower().rstrip(".")
    address = _address(host)
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if entry == "*":
            return True
        if not entry:
            continue
        if "://" in entry:
            entry = entry.partition("://")[2]
        entry = entry.rstrip("/")
        entry_port: int | None = None
        if entry.startswith("["):  # [::1] or [::1]:8443
            address_text, _, rest = entry[1:].partition("]")
            if rest.startswith(":") and rest[1:].isdigit():
                entry_port = int(rest[1:])
            entry = address_text
        elif entry.count(":") == 1:
            name, _, digits = entry.partition(":")
            if digits.isdigit():
                entry, entry_port = name, int(digits)
        if entry_port is not None and entry_port != port:
            continue
        # curl's rule: a trailing dot is no part of the name ("example.com.").
        entry = entry.rstrip(".")
        network = _network(entry)
        if network is not None or address is not None:
            # An address is no domain: "0.0.1" must not take in 10.0.0.1 by
            # its suffix (httpx's pattern does), and "::1" equals "0:0::1".
            # A network in CIDR form takes in its addresses, as in curl.
            if network is not None and address is not None and address in network:
                return True
            continue
        if entry.startswith("*"):
            entry = entry[1:]
        if entry.startswith("."):
            if host.endswith(entry):
                return True
        elif host == entry or host.endswith("." + entry):
            return True
    return False


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _network(entry: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    if not entry or not (entry[0].isdigit() or ":" in entry):
        return None  # a name: spares the parse
    try:
        return ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return None


class ProxyRefused(SendError):
    """The proxy did not open the way to the service; nothing reached the service.

    The client turns it into the public ``ProxyError``.
    """

    def __init__(self, message: str, *, proxy: str, status_code: int | None = None) -> None:
        super().__init__(f"ProxyError: {message}", never_sent=True)
        self.proxy = proxy
        self.status_code = status_code


async def open_tunnel(stream: anyio.abc.ByteStream, proxy: Proxy, authority: str) -> None:
    """Ask the proxy for a tunnel to ``authority`` (host:port) over ``stream``.

    Returns once the proxy said 2xx, with nothing of the service's read yet
    (TLS: the client speaks first); else raises ProxyRefused.
    """
    h = h11.Connection(h11.CLIENT)
    headers = [("Host", authority), *proxy.headers]
    try:
        data = h.send(h11.Request(method="CONNECT", target=authority, headers=headers))
        await stream.send(data + (h.send(h11.EndOfMessage()) or b""))
        while True:
            event = h.next_event()
            if event is h11.NEED_DATA:
                try:
                    h.receive_data(await stream.receive(_READ_SIZE))
                except anyio.EndOfStream:
                    h.receive_data(b"")
            elif type(event) is h11.Response:
                break
            elif type(event) is not h11.InformationalResponse:
                raise ProxyRefused(
                    f"{proxy.shown} closed the connection instead of answering CONNECT {authority}",
                    proxy=proxy.shown,
                )
    except h11.RemoteProtocolError:
        raise ProxyRefused(
            f"{proxy.shown} answered CONNECT {authority} with something that is not HTTP "
            "(or closed the connection mid-answer)",
            proxy=proxy.shown,
        ) from None
    except (OSError, anyio.BrokenResourceError) as exc:
        raise ProxyRefused(
            f"{proxy.shown} dropped the connection while opening the tunnel to {authority} "
            f"({type(exc).__name__})",
            proxy=proxy.shown,
        ) from None
    status = event.status_code
    if not 200 <= status < 300:
        # Scrubbed before the excerpt cuts it: a proxy echoing its password
        # past the cut would otherwise leave the password's start in the error,
        # where the client's own scrubbing no longer finds the whole of it.
        reason = Scrubber(proxy.secrets).text(event.reason.decode("latin-1"))
        reason = excerpt(reason, 60)
        hint = " (wrong or missing credentials in the proxy URL)" if status == 407 else ""
        raise ProxyRefused(
            f"{proxy.shown} refused the tunnel to {authority}: {status} {reason}{hint}",
            proxy=proxy.shown,
            status_code=status,
        )
    if h.trailing_data[0]:
        # The service speaks only after our TLS hello: these bytes are the proxy's.
        raise ProxyRefused(
            f"{proxy.shown} sent bytes after opening the tunnel to {authority}",
            proxy=proxy.shown,
        )
