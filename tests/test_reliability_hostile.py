"""Hostile answers through the whole client: a real loopback peer sends them.

`test_hostile_xml.py` feeds the same payloads straight to the codecs; here they
travel over a socket, through httpx, the size cap and the retry loop, and each
must reach the caller as the library's own error with no file read, no network
touched and no oversized body held in memory.
"""

from __future__ import annotations

import gzip
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import asmx
import pytest
from relsupport import ARGS, FAST_RETRY, PASSWORD, USER, drain
from test_hostile_xml import MARKER, PAYLOADS, _answer_with, _root_name

import verif_client as vc
from verif_client.simulator import serve

pytestmark = pytest.mark.anyio

FIFTY_MB = 50 * 1024 * 1024
CHUNK = b"<a>" + b"x" * (64 * 1024 - 7) + b"</a>"


class Peer:
    """An ASGI peer whose answer the test sets, and which counts what it wrote."""

    def __init__(self) -> None:
        self.body = b""
        self.content_type = b"text/xml; charset=utf-8"
        self.requests = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await drain(receive)
        self.requests += 1
        headers = [
            (b"content-type", self.content_type),
            (b"content-length", b"%d" % len(self.body)),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


class Canary:
    """A TCP listener that only counts who connects: a fetched DTD or entity shows here."""

    def __init__(self) -> None:
        self.connections = 0

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        self.connections += 1
        await stream.aclose()


@pytest.fixture
async def canary() -> AsyncIterator[tuple[Canary, int]]:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    counter = Canary()
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, counter.handle)
        yield counter, listener.extra(anyio.abc.SocketAttribute.local_port)
        tg.cancel_scope.cancel()


def xxe_url(binding: vc.Binding, op: vc.Operation, port: int) -> bytes:
    dtd = f'<!DOCTYPE {_root_name(binding, op)} [<!ENTITY xxe SYSTEM "http://127.0.0.1:{port}/x">]>'
    return _answer_with(binding, op, dtd, "&xxe;")


def external_dtd_url(binding: vc.Binding, op: vc.Operation, port: int) -> bytes:
    dtd = f'<!DOCTYPE {_root_name(binding, op)} SYSTEM "http://127.0.0.1:{port}/evil.dtd">'
    return _answer_with(binding, op, dtd, "x")


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda payload: payload.__name__)
@pytest.mark.parametrize("binding", list(vc.Binding))
async def test_hostile_answer_over_the_wire_is_a_decode_error(
    binding: vc.Binding, payload: Any, tmp_path: Path, canary: tuple[Canary, int]
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(MARKER)
    peer = Peer()
    counter, canary_port = canary
    async with (
        serve(peer) as server,
        vc.VerificationClient(
            server.base_url, username=USER, password=PASSWORD, binding=binding, retry=FAST_RETRY
        ) as client,
    ):
        for op in vc.OPERATIONS:
            for body in (
                payload(binding, op, secret),
                xxe_url(binding, op, canary_port),
                external_dtd_url(binding, op, canary_port),
            ):
                peer.body = body
                with anyio.fail_after(20), pytest.raises(vc.DecodeError) as caught:
                    await client.call_with(op, ARGS[op.name])
                assert MARKER not in str(caught.value)
                assert MARKER not in repr(caught.value.args)
        # A hostile 200 is not retried: one request per call, and nobody fetched anything.
        assert peer.requests == 3 * len(vc.OPERATIONS)
    assert counter.connections == 0


async def test_the_payloads_are_valid_answers_without_their_prologue() -> None:
    # Guards the test above: the same answer without the hostile part decodes.
    peer = Peer()
    async with serve(peer) as server:
        for binding in vc.Binding:
            async with vc.VerificationClient(
                server.base_url, username=USER, password=PASSWORD, binding=binding
            ) as client:
                for op in vc.OPERATIONS:
                    peer.body = asmx.response(binding, op, _valid_content(op))
                    assert await client.call_with(op, ARGS[op.name]) is not None


def _valid_content(op: vc.Operation) -> str:
    return {
        "SecureLink_Confirmation_SendRequestViaSms": "<SecureLinkRequestId>7</SecureLinkRequestId>",
        "UpdatePrivateBadCheckRejectReason": "true",
        "RevokeMobileConsent": "true",
        "GetMobileConsentText": "text",
    }.get(op.name, "")


class Flood:
    """Streams a 50 MB answer in 64 KiB chunks and counts what it got out."""

    def __init__(self, *, declare_length: bool) -> None:
        self.declare_length = declare_length
        self.written = 0
        self.cut_off = anyio.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await drain(receive)
        headers = [(b"content-type", b"text/xml; charset=utf-8")]
        if self.declare_length:
            headers.append((b"content-length", b"%d" % FIFTY_MB))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            while self.written < FIFTY_MB:
                await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
                self.written += len(CHUNK)
            await send({"type": "http.response.body", "body": b""})
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            self.cut_off.set()


@pytest.mark.parametrize("declare_length", [True, False], ids=["content-length", "chunked"])
async def test_fifty_megabytes_are_refused_while_streaming(declare_length: bool) -> None:
    flood = Flood(declare_length=declare_length)
    tracemalloc.start()
    try:
        async with (
            serve(flood) as server,
            vc.VerificationClient(
                server.base_url, username=USER, password=PASSWORD, retry=vc.NO_RETRY
            ) as client,
        ):
            with anyio.fail_after(30), pytest.raises(vc.ResponseTooLargeError):
                await client.get_mobile_consent_text()
            _, peak = tracemalloc.get_traced_memory()
            # The client hung up: the peer could not write the whole body.
            with anyio.fail_after(30):
                await flood.cut_off.wait()
    finally:
        tracemalloc.stop()
    assert flood.written < FIFTY_MB // 2
    assert peak < 16 * 1024 * 1024


async def test_gzip_bomb_is_refused_without_being_inflated_whole() -> None:
    bomb = gzip.compress(b"<a>" + b"\0" * FIFTY_MB, compresslevel=9)
    assert len(bomb) < 100 * 1024
    headers = [
        (b"content-type", b"text/xml; charset=utf-8"),
        (b"content-encoding", b"gzip"),
        (b"content-length", b"%d" % len(bomb)),
    ]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await drain(receive)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": bomb})

    tracemalloc.start()
    try:
        async with (
            serve(app) as server,
            vc.VerificationClient(
                server.base_url, username=USER, password=PASSWORD, retry=vc.NO_RETRY
            ) as client,
        ):
            tracemalloc.reset_peak()
            with anyio.fail_after(30), pytest.raises(vc.ResponseTooLargeError):
                await client.get_mobile_consent_text()
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate", "br"])
async def test_compressed_answers_still_decode(encoding: str) -> None:
    import zlib

    plain = asmx.response(vc.Binding.SOAP11, vc.get_operation("GetMobileConsentText"), "hi")
    body = {
        "gzip": lambda: gzip.compress(plain),
        "deflate": lambda: zlib.compress(plain),
        "raw-deflate": lambda: zlib.compress(plain)[2:-4],
        "br": lambda: b"\x0b\x00\x80hello\x03",
    }[encoding]()
    wire_name = "deflate" if encoding == "raw-deflate" else encoding
    headers = [(b"content-type", b"text/xml"), (b"content-encoding", wire_name.encode())]
    peer_headers = [*headers, (b"content-length", b"%d" % len(body))]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await drain(receive)
        await send({"type": "http.response.start", "status": 200, "headers": peer_headers})
        await send({"type": "http.response.body", "body": body})

    async with (
        serve(app) as server,
        vc.VerificationClient(server.base_url, username=USER, password=PASSWORD) as client,
    ):
        if encoding == "br":
            # Never asked for (Accept-Encoding: gzip, deflate), so refused, typed.
            with pytest.raises(vc.DecodeError, match="Content-Encoding"):
                await client.get_mobile_consent_text()
        else:
            assert await client.get_mobile_consent_text() == "hi"
