"""No error the library hands out holds the password anywhere reachable from it.

A server that echoes the request (a SOAP fault quoting it, a 500 HTML or text
page, a 200 text answer) makes the client fail with a masked error. Masking
its texts is not enough: the unmasked error, the echoed body or the request
must not be one attribute away either, in ``__context__``, ``__cause__``,
``args``, attributes, notes, group members, or the locals of the frames its
traceback keeps (error reporters, ``traceback.TracebackException``, pickling,
debuggers and log handlers all walk those).
"""

from __future__ import annotations

import html
import os
import pickle
import re
import traceback
import types
import urllib.parse
from collections.abc import Awaitable
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream
from relsupport import WITH_UVLOOP

import verif_client as vc
from verif_client import _xml
from verif_client._codec import Codec, Credentials
from verif_client._scrub import Scrubber
from verif_client._transport._spliced import IdRequests

USER = "acme-chain-user"
PASSWORDS = ["Chain-Pa55-7c3a9e-never-show", "Pa&55<x>\"q'-chain-never-9d4"]
SOAP11 = "http://schemas.xmlsoap.org/soap/envelope/"
SOAP12 = "http://www.w3.org/2003/05/soap-envelope"
SHAPES = ["soap-fault", "html-500", "text-500", "text-200", "header-echo"]
FAST = vc.RetryPolicy(attempts=2, initial_backoff=0.001, max_backoff=0.002, deadline=5)
# What holds the credentials by design: the client the caller made, its
# codecs (the encoded header), a poll run's requests prebuilt from them
# (the same header, see _transport._spliced) and its scrubber (what to
# mask). Only their repr and str are checked; every other object of ours is
# walked into.
PACKAGE = os.path.dirname(vc.__file__) + os.sep
KEEPERS = (vc.VerificationClient, Codec, Credentials, IdRequests, Scrubber)
SEND = ("send_confirmation_sms", ("5125550100", "Is this you?"))
POLL = ("has_been_verified", (4294967297,))


def _answer(shape: str, request: str, soap12: bool) -> bytes:
    status, kind = "500 Internal Server Error", "text/plain; charset=utf-8"
    if shape == "soap-fault":
        text = _xml.escape(request)
        if soap12:
            kind = "application/soap+xml; charset=utf-8"
            fault = (
                f"<soap:Fault><soap:Code><soap:Value>soap:Receiver</soap:Value></soap:Code>"
                f'<soap:Reason><soap:Text xml:lang="en">{text}</soap:Text></soap:Reason>'
                f"<soap:Detail>{text}</soap:Detail></soap:Fault>"
            )
        else:
            kind = "text/xml; charset=utf-8"
            fault = (
                f"<soap:Fault><faultcode>soap:Server</faultcode><faultstring>{text}"
                f"</faultstring><detail>{text}</detail></soap:Fault>"
            )
        env = SOAP12 if soap12 else SOAP11
        body = (
            f'<?xml version="1.0" encoding="utf-8"?><soap:Envelope xmlns:soap="{env}">'
            f"<soap:Body>{fault}</soap:Body></soap:Envelope>"
        ).encode()
    elif shape == "html-500":
        kind = "text/html; charset=utf-8"
        quoted = html.escape(request)
        body = (
            f"<html><head><title>Runtime Error: {quoted}</title></head>"
            f"<body><h1>Server Error</h1><pre>{quoted}</pre></body></html>"
        ).encode()
    elif shape == "text-500":
        body = ("System.Exception: " + request).encode()
    elif shape == "text-200":
        status = "200 OK"
        body = ("Error: " + request).encode()
    else:
        # The password, as sent, in a header line with no colon: the
        # parser's own error quotes it (h11 does; llhttp names the error).
        found = re.search(r"<ApiPassword>(.*?)</ApiPassword>", request)
        assert found is not None
        sent = html.unescape(found.group(1)).encode()
        return b"HTTP/1.1 200 OK\r\nX-Echo " + sent + b"\r\nContent-Length: 0\r\n\r\n"
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def _echo(stream: SocketStream, shape: str) -> None:
    """Answer one request with itself, whole (head and body), in ``shape``."""
    async with stream:
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                data += await stream.receive()
            head, _, body = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(body) < length:
                body += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return
        # The body first: the envelope is one line, so the password is on the first line.
        request = (body + b"\r\n" + head).decode("utf-8", "replace")
        soap12 = b"application/soap+xml" in head.lower()
        await stream.send(_answer(shape, request, soap12))


def _forms(secret: str) -> list[str]:
    """The secret in every form it may travel in, and every 12-character
    piece of each (a cut at a length limit keeps a piece)."""
    forms = {
        secret,
        _xml.escape(secret),
        _xml.escape(_xml.escape(secret)),
        html.escape(secret),
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret),
        repr(secret)[1:-1],
        repr(secret.encode())[2:-1],
    }
    return sorted({form[i : i + 12] for form in forms for i in range(len(form) - 11)} | forms)


class _Walk:
    """Everything reachable from an error, each text checked for the secret."""

    def __init__(self, secret: str, callers: tuple[BaseException, ...] = ()) -> None:
        self.pieces = _forms(secret)
        self.callers = callers  # the caller's own errors: theirs, not walked
        self.seen: set[int] = set()
        self.found: list[str] = []
        self.frames = 0

    def text(self, text: str, where: str) -> None:
        for piece in self.pieces:
            if piece in text:
                self.found.append(f"{where}: {piece!r} in {text[:200]!r}")
                return

    def value(self, value: object, where: str, depth: int = 0) -> None:
        if depth > 12 or id(value) in self.seen:
            return
        self.seen.add(id(value))
        if isinstance(value, str):
            self.text(value, where)
        elif isinstance(value, bytes | bytearray | memoryview):
            self.text(bytes(value).decode("latin-1"), where)
        elif value is None or isinstance(value, bool | int | float):
            return
        elif isinstance(value, BaseException):
            self.error(value, where, depth)
        elif isinstance(value, types.TracebackType):
            self.traceback(value, where, depth)
        elif isinstance(value, dict):
            for key, inner in list(value.items()):
                self.value(key, f"{where}[key]", depth + 1)
                self.value(inner, f"{where}[{key!r}]", depth + 1)
        elif isinstance(value, list | tuple | set | frozenset):
            for n, inner in enumerate(list(value)):
                self.value(inner, f"{where}[{n}]", depth + 1)
        else:
            self.text(repr(value), f"repr({where})")
            self.text(str(value), f"str({where})")
            if type(value).__module__.startswith("verif_client.") and not isinstance(
                value, KEEPERS
            ):
                self.attributes(value, where, depth)

    def attributes(self, value: object, where: str, depth: int) -> None:
        names = set(getattr(value, "__dict__", {}))
        for kind in type(value).__mro__:
            slots = kind.__dict__.get("__slots__", ())
            names.update([slots] if isinstance(slots, str) else slots)
        for name in sorted(names):
            if name.startswith("__"):
                continue
            try:
                inner = getattr(value, name)
            except AttributeError:
                continue
            self.value(inner, f"{where}.{name}", depth + 1)

    def error(self, exc: BaseException, where: str, depth: int) -> None:
        if exc in self.callers:
            return
        self.text(repr(exc), f"repr({where})")
        self.text(str(exc), f"str({where})")
        self.value(exc.args, f"{where}.args", depth + 1)
        self.value(exc.__cause__, f"{where}.__cause__", depth + 1)
        self.value(exc.__context__, f"{where}.__context__", depth + 1)
        self.value(getattr(exc, "__notes__", None), f"{where}.__notes__", depth + 1)
        if isinstance(exc, BaseExceptionGroup):
            self.value(exc.exceptions, f"{where}.exceptions", depth + 1)
        self.attributes(exc, where, depth)
        self.value(exc.__traceback__, f"{where}.__traceback__", depth + 1)

    def traceback(self, tb: types.TracebackType | None, where: str, depth: int) -> None:
        while tb is not None:
            self.frame(tb.tb_frame, where, depth)
            # A frame the traceback keeps keeps its callers too (f_back), with
            # their locals as they left them: a frame of ours that called the
            # one that raised, without the error going through it, is not in
            # the traceback but is one attribute away.
            back = tb.tb_frame.f_back
            while back is not None and _ours(back):
                self.frame(back, where, depth)
                back = back.f_back
            tb = tb.tb_next

    def frame(self, frame: types.FrameType, where: str, depth: int) -> None:
        if id(frame) in self.seen:
            return
        self.seen.add(id(frame))
        self.frames += 1
        name = f"{where}:{frame.f_code.co_qualname}"
        for local, inner in list(frame.f_locals.items()):
            self.value(inner, f"{name}.{local}", depth + 1)


def _ours(frame: types.FrameType) -> bool:
    return frame.f_code.co_filename.startswith(PACKAGE)


def assert_nothing_holds(
    error: BaseException, secret: str, callers: tuple[BaseException, ...] = ()
) -> None:
    walk = _Walk(secret, callers)
    walk.value(error, "error")
    # The walk went through the frames the error keeps (the library's own).
    assert walk.frames > 0
    assert not walk.found, "\n".join(walk.found)
    shown = [
        pickle.dumps(error).decode("latin-1"),
        "".join(traceback.TracebackException.from_exception(error).format()),
        "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format()),
        "".join(traceback.format_exception(error)),
    ]
    for text in shown:
        for piece in walk.pieces:
            assert piece not in text, (piece, text[:2000])


async def _caught(awaitable: Awaitable[object]) -> BaseException:
    """The error ``awaitable`` raises (this frame, kept in its traceback,
    holds nothing of the test's)."""
    try:
        await awaitable
    except Exception as exc:
        return exc
    raise AssertionError("the echo was taken for an answer")


async def _caught_in_except(awaitable: Awaitable[object]) -> tuple[BaseException, BaseException]:
    """Like _caught, the call made while the caller handles an error of its own."""
    try:
        raise LookupError("the caller's own error")
    except LookupError as own:
        return await _caught(awaitable), own


@pytest.fixture(params=WITH_UVLOOP)
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    return request.param


@pytest.mark.anyio
@pytest.mark.parametrize("password", PASSWORDS, ids=["plain", "specials"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("binding", [vc.Binding.SOAP11, vc.Binding.SOAP12])
async def test_no_error_of_an_echoing_server_holds_the_password(
    binding: vc.Binding, shape: str, password: str, answer_parser: str
) -> None:
    errors: list[tuple[str, BaseException, tuple[BaseException, ...]]] = []
    async with anyio.create_task_group() as tg:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)

        async def serve() -> None:
            async with listener:
                await listener.serve(lambda stream: _echo(stream, shape))

        tg.start_soon(serve)
        with anyio.fail_after(30):
            async with vc.VerificationClient(
                f"http://127.0.0.1:{port}",
                username=USER,
                password=password,
                binding=binding,
                retry=FAST,
                username_is_secret=True,
            ) as client:
                for name, args in (SEND, POLL):
                    call = getattr(client, name)
                    errors.append((name, await _caught(call(*args)), ()))
                    error, own = await _caught_in_except(call(*args))
                    # The caller's own error may be the context: it is theirs.
                    assert error.__context__ in (None, own)
                    errors.append((f"{name} in except", error, (own,)))
                policy = vc.PollPolicy(initial_delay=0.001, timeout=5, retry=FAST)
                async with client.poll_verifications([4294967297], policy=policy) as outcomes:
                    async for outcome in outcomes:
                        assert outcome.status is vc.PollStatus.FAILED, outcome
                        assert outcome.error is not None
                        errors.append(("poll run", outcome.error, ()))
        tg.cancel_scope.cancel()
    for what, error, callers in errors:
        if shape == "header-echo":
            assert isinstance(error, vc.TransportError), (what, error)
        else:
            assert isinstance(error, vc.ResponseError), (what, error)
        if shape != "text-200" and (shape != "header-echo" or answer_parser == "h11"):
            # The echo reached the error: its text shows the mask where the password was.
            assert "***" in str(error), (what, str(error))
        try:
            assert_nothing_holds(error, password, callers)
        except AssertionError as failed:
            raise AssertionError(f"{what}: {failed}") from None
