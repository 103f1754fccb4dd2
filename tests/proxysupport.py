"""Real peers for the proxy and client-certificate tests: a forward proxy of our
own and the simulator behind TLS (certificates from trustme), on loopback.

The proxy answers ``CONNECT`` with a tunnel and absolute-form requests by
forwarding them in origin form, requires Basic credentials, and logs every
head it was sent. Whatever host it is asked for, it connects to 127.0.0.1: a
name like ``service.test`` exists only through it, so a call that reaches the
service by that name went through the proxy.
"""

from __future__ import annotations

import base64
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress

import anyio
import anyio.abc
import pytest
import trustme
from anyio.from_thread import start_blocking_portal
from anyio.streams.tls import TLSListener
from relsupport import PASSWORD, USER
from test_transport_bad_peers import GONE, Wire, raw_server

from verif_client.simulator import Simulator
from verif_client.simulator._server import Server, _Connection

SERVICE = "service.test"
PROXY_USER, PROXY_PASSWORD = "proxy-user", "Pr0xy-pa55-9c2e-never-show"
GARBAGE = b"\x00\xff\xfeSSH-2.0-not-a-proxy\r\n\r\n"


PROXY_VARIABLES = ("https_proxy", "http_proxy", "all_proxy", "no_proxy")


def without_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy (nor CA) variables of the machine running the tests: in either case,
    for this process and the CLI subprocesses it starts."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


def proxy_url(port: int, user: str = PROXY_USER, password: str = PROXY_PASSWORD) -> str:
    return f"http://{user}:{password}@127.0.0.1:{port}"


class ForwardProxy:
    """A forward proxy; set ``refuse`` (a status line such as ``b"403 Forbidden"``),
    ``misbehave`` (``"close"``: hang up instead of answering; ``"garbage"``:
    answer bytes that are not HTTP) or ``cut`` (an event: once set, every open
    tunnel is closed) to make it a bad one."""

    def __init__(self, *, user: str = PROXY_USER, password: str = PROXY_PASSWORD) -> None:
        pair = f"{user}:{password}".encode()
        self.expected = b"Basic " + base64.b64encode(pair)
        self.heads: list[bytes] = []
        self.refuse: bytes | None = None
        self.misbehave: str | None = None
        self.cut: anyio.Event | None = None
        self.tunnels = 0

    async def __call__(self, client: anyio.abc.SocketStream) -> None:
        wire = Wire(client)
        request = await wire.request()
        if request is None:
            return
        head = request.partition(b"\r\n\r\n")[0]
        self.heads.append(head)
        if self.misbehave == "close":
            return
        if self.misbehave == "garbage":
            await client.send(GARBAGE)
            return
        refusal = self.refuse
        if refusal is None and _header(head, b"proxy-authorization") != self.expected:
            refusal = b"407 Proxy Authentication Required"
        if refusal is not None:
            await client.send(
                b'HTTP/1.1 %s\r\nProxy-Authenticate: Basic realm="test"\r\n'
                b"Content-Length: 0\r\nConnection: close\r\n\r\n" % refusal
            )
            return
        method, target, _ = head.split(b"\r\n", 1)[0].split(b" ", 2)
        if method == b"CONNECT":
            port = int(target.rpartition(b":")[2])
            async with await anyio.connect_tcp("127.0.0.1", port) as service:
                await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self.tunnels += 1
                await self._relay(client, service, wire.buffer)
            return
        # Absolute form: http://host:port/path, forwarded as /path.
        authority = target.split(b"/", 3)[2]
        port = int(authority.rpartition(b":")[2]) if b":" in authority else 80
        service = await anyio.connect_tcp("127.0.0.1", port)
        async with service, anyio.create_task_group() as tg:
            tg.start_soon(_pipe, service, client)
            while request is not None:
                await service.send(_origin_form(request))
                request = await wire.request()
                if request is not None:
                    self.heads.append(request.partition(b"\r\n\r\n")[0])
            tg.cancel_scope.cancel()

    async def _relay(
        self, client: anyio.abc.ByteStream, service: anyio.abc.ByteStream, early: bytes
    ) -> None:
        if early:
            await service.send(early)
        async with anyio.create_task_group() as tg:

            async def both_ways() -> None:
                async with anyio.create_task_group() as pipes:
                    pipes.start_soon(_pipe, client, service)
                    pipes.start_soon(_pipe, service, client)
                tg.cancel_scope.cancel()

            tg.start_soon(both_ways)
            if self.cut is not None:
                await self.cut.wait()
                tg.cancel_scope.cancel()


async def _pipe(source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream) -> None:
    with suppress(*GONE):
        while True:
            await sink.send(await source.receive())


def _header(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def _origin_form(request: bytes) -> bytes:
    line, _, rest = request.partition(b"\r\n")
    method, target, version = line.split(b" ", 2)
    path = b"/" + target.split(b"/", 3)[3]
    headers = [h for h in rest.split(b"\r\n") if not h.lower().startswith(b"proxy-authorization:")]
    return b"%s %s %s\r\n%s" % (method, path, version, b"\r\n".join(headers))


@asynccontextmanager
async def forward_proxy(proxy: ForwardProxy) -> AsyncIterator[int]:
    async with raw_server(proxy) as port:
        yield port


@contextmanager
def proxy_in_thread(proxy: ForwardProxy) -> Iterator[int]:
    """The proxy on an event loop of its own thread, for subprocess tests."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(forward_proxy(proxy)) as port,
    ):
        yield port


class Certificates:
    """A CA of the test's own, the service's certificate, and a client's."""

    def __init__(self, service_name: str = SERVICE) -> None:
        self.ca = trustme.CA()
        self.service = self.ca.issue_cert(service_name, "127.0.0.1")
        self.client = self.ca.issue_cert("client@acme.test")
        # The server names (SNI) clients asked for, as the server saw them.
        self.sni: list[str | None] = []

    def trusting(self) -> ssl.SSLContext:
        """A client context that trusts this CA (and nothing else)."""
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        self.ca.configure_trust(context)
        return context

    def server_context(self, *, require_client_cert: bool = False) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.service.configure_cert(context)
        context.sni_callback = lambda _socket, name, _context: self.sni.append(name)
        if require_client_cert:
            self.ca.configure_trust(context)
            context.verify_mode = ssl.CERT_REQUIRED
        return context


@asynccontextmanager
async def simulator_server(
    simulator: Simulator | None = None, context: ssl.SSLContext | None = None
) -> AsyncIterator[int]:
    """The simulator on a loopback port (behind TLS with ``context``); yields the port."""
    app = simulator or Simulator(credentials=(USER, PASSWORD))
    tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = tcp.extra(anyio.abc.SocketAttribute.local_port)
    server = Server("127.0.0.1", port)
    listener: anyio.abc.Listener[anyio.abc.ByteStream] = (
        tcp if context is None else TLSListener(tcp, context, standard_compatible=False)
    )

    async def handle(stream: anyio.abc.ByteStream) -> None:
        with suppress(*GONE, ssl.SSLError):
            await _Connection(app, stream, server).run()  # type: ignore[arg-type]

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        yield port
        tg.cancel_scope.cancel()


@contextmanager
def tls_front(context: ssl.SSLContext, upstream: int) -> Iterator[int]:
    """TLS in front of a plain loopback port, the way a web server does it, in
    threads with the standard library's blocking sockets: a failed handshake
    ends with OpenSSL's alert sent, and the connection drained before it is
    closed (no reset that could overtake the alert). Yields the TLS port."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def pump(source: socket.socket, sink: socket.socket) -> None:
        with suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def serve(raw: socket.socket) -> None:
        tls = context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        try:
            tls.do_handshake()
        except (ssl.SSLError, OSError):
            # The alert is sent; read what the client still writes, as plain bytes.
            with suppress(OSError):
                tls.settimeout(5)
                socket.socket.shutdown(tls, socket.SHUT_WR)
                while socket.socket.recv(tls, 65536):
                    pass
            tls.close()
            return
        with tls, socket.create_connection(("127.0.0.1", upstream)) as plain:
            upstreams.append(plain)
            back = threading.Thread(target=pump, args=(plain, tls), daemon=True)
            back.start()
            pump(tls, plain)
            back.join()

    served: list[threading.Thread] = []
    upstreams: list[socket.socket] = []

    def accept() -> None:
        with suppress(OSError):
            while True:
                raw, _ = listener.accept()
                served.append(threading.Thread(target=serve, args=(raw,), daemon=True))
                served[-1].start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield port
    finally:
        # A close alone leaves accept() blocked, and the socket listening, for good.
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        acceptor.join(timeout=10)
        # The upstream is served on the event loop this teardown blocks: its
        # side of a connection would never close, and each join would wait
        # out its 10 s.
        for plain in upstreams:
            with suppress(OSError):
                plain.shutdown(socket.SHUT_RDWR)
        for thread in served:
            thread.join(timeout=10)
        assert not acceptor.is_alive()
