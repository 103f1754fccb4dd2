"""Opening a pool's connections: to the origin or its proxy (through a
CONNECT tunnel for TLS), by the loop's own create_connection on asyncio,
by anyio elsewhere, TLS by asyncio's own layer where our receiver reads."""

from __future__ import annotations

import asyncio
import ipaddress
import ssl

import anyio
import anyio.abc

from . import SendError
from ._connection import Connection, read_in_heap_sized_chunks, transport_of
from ._deadlines import Deadlines
from ._proxy import Proxy, ProxyRefused, open_tunnel
from ._receiver import AsyncioReceiver
from ._tls import ClientCert, certificate_refused, tls_context


class Opener:
    """How one pool's connections are opened, and what a refusal raises."""

    __slots__ = (
        "_cert",
        "_dial",
        "_direct",
        "_eyeballs",
        "_host",
        "_proxy",
        "_ssl",
        "_tls",
        "_trusted",
        "_tunnel_to",
        "_verify",
    )

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls: bool,
        verify: bool | ssl.SSLContext,
        cert: ClientCert | None,
        trusted: tuple[str | None, str | None],
        proxy: Proxy | None,
    ) -> None:
        self._host = host
        self._tls = tls
        self._verify = verify
        self._cert = cert
        self._trusted = trusted
        self._proxy = proxy
        # Where connections go: all decided here, so a pool without a proxy
        # does no more per connection than before.
        self._dial = (host, port) if proxy is None else (proxy.host, proxy.port)
        bracketed = f"[{host}]" if ":" in host else host
        self._tunnel_to = f"{bracketed}:{port}" if proxy is not None and tls else None
        self._ssl: ssl.SSLContext | None = None
        # Whether the loop's own create_connection opens connections (see adopt).
        self._direct = False
        self._eyeballs: float | None = None

    def adopt(self, deadlines: Deadlines | None) -> None:
        """Open on the running event loop (its deadlines: None on trio)."""
        self._direct, self._eyeballs = _direct_connect(deadlines, self._proxy, self._dial[0])

    async def connect(self, deadlines: Deadlines | None) -> Connection:
        stream: anyio.abc.ByteStream | None = None
        receiver: AsyncioReceiver | None = None
        try:
            if deadlines is not None and self._direct:
                # asyncio: the loop's own connection with our protocol from
                # the start, a few hundred µs and some thirty objects less per
                # connection than anyio's stream over it (see _receiver).
                loop, (host, port) = deadlines.loop, self._dial
                transport, receiver = await (
                    loop.create_connection(AsyncioReceiver, host, port)
                    if self._eyeballs is None
                    else loop.create_connection(
                        AsyncioReceiver, host, port, happy_eyeballs_delay=self._eyeballs
                    )
                )
                fd = transport.get_extra_info("socket").fileno()
                read_in_heap_sized_chunks(transport)
            else:
                stream = await anyio.connect_tcp(*self._dial)
                fd = stream.extra(anyio.abc.SocketAttribute.raw_socket).fileno()
        except OSError as exc:
            if self._proxy is not None:
                raise ProxyRefused(
                    f"cannot connect to the proxy {self._proxy.shown}: {reason_of(exc)}",
                    proxy=self._proxy.shown,
                ) from None
            raise SendError(f"ConnectError: {reason_of(exc)}", never_sent=True) from None
        try:
            if stream is not None:
                if self._tunnel_to is not None:
                    assert self._proxy is not None
                    await open_tunnel(stream, self._proxy, self._tunnel_to)
                receiver = AsyncioReceiver.take_over(stream)
                read_in_heap_sized_chunks(transport_of(stream))
            if self._tls:
                # The handshake as anyio.connect_tcp(ssl_context=...) makes it,
                # by asyncio's own TLS layer where the receiver took over.
                if receiver is not None:
                    await receiver.start_tls(self._ssl_context(), self._host)
                else:
                    from anyio.streams.tls import TLSStream

                    assert stream is not None
                    stream = await TLSStream.wrap(
                        stream,
                        server_side=False,
                        hostname=self._host,
                        ssl_context=self._ssl_context(),
                        standard_compatible=False,
                    )
        except BaseException as exc:
            if stream is not None:
                await anyio.aclose_forcefully(stream)
            elif receiver is not None:
                receiver.abort()
            if isinstance(exc, (OSError, anyio.BrokenResourceError, anyio.EndOfStream)):
                # Nothing of the request was written: it provably never left.
                reason = reason_of(exc)
                if (refused := certificate_refused(reason)) is not False:
                    raise self.certificate_refused(reason, certain=refused is True) from None
                raise SendError(f"ConnectError: {reason}", never_sent=True) from None
            raise
        return Connection(stream, receiver, fd, tls=self._tls)

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = tls_context(self._verify, self._cert, self._trusted)
        return self._ssl

    def certificate_refused(self, reason: str, *, certain: bool) -> SendError:
        """What a connection (or an attempt's first read, under TLS 1.3) refused
        for its client certificate raises."""
        # The server ended the handshake (under TLS 1.3 its end comes as the
        # first answer): no request reached the service.
        how = "cert=; on the command line --client-cert"
        if self._cert is not None:
            wanted = f"refused the client certificate {self._cert.certfile}"
        elif certain:
            wanted = f"asked for a client certificate and none was given ({how})"
        else:
            wanted = f"refused the TLS handshake (does it want a client certificate? {how})"
        return SendError(f"ConnectError: the server {wanted}: {reason}", never_sent=True)


def _direct_connect(
    deadlines: Deadlines | None, proxy: Proxy | None, host: str
) -> tuple[bool, float | None]:
    """Whether the loop's own create_connection opens connections, and its
    happy-eyeballs delay. anyio connects on trio, through a proxy (the tunnel
    goes through anyio's stream), and on uvloop for a name to resolve: a name
    may have several addresses, and anyio tries the next one 250 ms after the
    first (happy eyeballs), not once the first timed out (the whole attempt's
    time, for a peer that drops the SYN); asyncio's loop does the same when
    asked, uvloop's cannot."""
    if deadlines is None or proxy is not None:
        return False, None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        # A name: asyncio's loop races its addresses when given a delay
        # (for an address too, with a task per connection: never asked then).
        return (True, 0.25) if isinstance(deadlines.loop, asyncio.BaseEventLoop) else (False, None)
    return True, None


def reason_of(exc: BaseException) -> str:
    # anyio and ssl often keep the useful words (a certificate failure, the
    # refused address) on the exception they chain from.
    cause: BaseException | None = exc
    for _ in range(6):
        if cause is None:
            break
        text = str(cause)
        if text:
            return text
        cause = cause.__cause__ or cause.__context__
    return type(exc).__name__
