"""A peer that echoes the password in an encoding of its own never gets it shown.

A gateway or a web server echoing the request writes the password the way its
own output format does: HTML-escaped (named or numeric references) in an error
page, JSON-escaped in a JSON error body, URL-encoded, or so that h11 quotes it
as a bytes repr in its message about an illegal header. The raw TCP server here
answers each call with the password it was sent, in one such shape; the error,
the DEBUG log and ``verif-client -v call``'s output must not hold the password
in any encoding. A short password is masked only where it stands as a word.
"""

from __future__ import annotations

import html
import importlib.util
import json
import logging
import re
import urllib.parse
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from relsupport import run_cli
from test_transport_bad_peers import Wire, raw_server

import verif_client as vc
from verif_client._scrub import Scrubber

pytestmark = pytest.mark.anyio

USER = "acme-encoded"
# A quote, an ampersand, angle brackets and letters outside ASCII: each has
# an encoding of its own in HTML, JSON, URLs and bytes reprs.
PASSWORDS = ["Grüße'\"&<>-9c1f-never", "Plain-Pa55-ascii-7e2d-never"]
VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"


def _numeric(secret: str) -> str:
    return "".join(f"&#x{ord(c):x};" if not c.isalnum() or ord(c) > 127 else c for c in secret)


def _http(status: bytes, content_type: bytes, body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n%s" % (
        status,
        content_type,
        len(body),
        extra,
        body,
    )


SHAPES: dict[str, Callable[[str], bytes]] = {
    "html-title": lambda pw: _http(
        b"500 Internal Server Error",
        b"text/html; charset=utf-8",
        f"<html><head><title>Login failed for {html.escape(pw)}</title></head></html>".encode(),
    ),
    "html-numeric": lambda pw: _http(
        b"500 Internal Server Error",
        b"text/html",
        f"<html><body><p>password={_numeric(pw)}</p></body></html>".encode(),
    ),
    "json": lambda pw: _http(
        b"400 Bad Request",
        b"application/json",
        json.dumps({"error": "bad credentials", "echo": {"Password": pw}}).encode(),
    ),
    "json-in-200": lambda pw: _http(
        b"200 OK",
        b"text/xml; charset=utf-8",
        json.dumps({"Password": pw}).encode(),
    ),
    "url-encoded": lambda pw: _http(
        b"502 Bad Gateway",
        b"text/plain",
        f"upstream refused /login?user={USER}&password={urllib.parse.quote_plus(pw)}".encode(),
    ),
    "illegal-header": lambda pw: _http(
        b"200 OK", b"text/xml", b"", extra=b"X-Echo " + pw.encode() + b"\r\n"
    ),
    "illegal-status": lambda pw: b"HTTP/1.1 " + pw.encode() + b"\r\nContent-Length: 0\r\n\r\n",
}


def _sent_password(request: bytes) -> str:
    found = re.search(rb"<ApiPassword>(.*?)</ApiPassword>", request, re.S)
    assert found, "the SOAP request carries the password"
    return html.unescape(found.group(1).decode())


def echoing(shape: str) -> Callable[[anyio.abc.SocketStream], Any]:
    async def handle(stream: anyio.abc.SocketStream) -> None:
        wire = Wire(stream)
        while (request := await wire.request()) is not None:
            await stream.send(SHAPES[shape](_sent_password(request)))

    return handle


def every_form(password: str) -> list[str]:
    """The password as the shapes write it, and a piece of each long enough to
    tell: none may be shown."""
    forms = {
        password,
        html.escape(password),
        _numeric(password),
        json.dumps(password)[1:-1],
        urllib.parse.quote_plus(password),
        repr(password.encode())[2:-1],
    }
    return sorted(forms)


# Shapes only a parser's own error message echoes: h11 quotes the bad line as
# a bytes repr; llhttp (the speedups extra) names the error without the bytes.
ECHOED_BY_THE_PARSER = frozenset({"illegal-header", "illegal-status"})


def assert_hidden(text: str, password: str, *, echoed: bool = True) -> None:
    for form in every_form(password):
        assert form not in text, f"the password shows as {form!r} in {text!r}"
    if echoed:
        assert "***" in text, f"the echo was lost rather than masked: {text!r}"


def echoed_with(parser: str, shape: str) -> bool:
    return parser == "h11" or shape not in ECHOED_BY_THE_PARSER


@pytest.mark.parametrize("password", PASSWORDS)
@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_an_echo_in_any_encoding_is_masked_in_the_error_and_the_log(
    shape: str, password: str, caplog: pytest.LogCaptureFixture, answer_parser: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="verif_client")
    async with (
        raw_server(echoing(shape)) as port,
        vc.VerificationClient(
            f"http://127.0.0.1:{port}",
            username=USER,
            password=password,
            retry=vc.RetryPolicy(attempts=1),
        ) as client,
    ):
        with pytest.raises(vc.VerifClientError) as caught:
            await client.has_been_verified(4294967297)
    error = caught.value
    names = ("message", "reason", "detail", "server_message")
    texts = [getattr(error, name, None) for name in names]
    shown = [str(error), repr(error), *(str(t) for t in texts if t)]
    assert_hidden(
        "\n".join([*shown, caplog.text]), password, echoed=echoed_with(answer_parser, shape)
    )


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("shape", ["html-title", "json", "illegal-header"])
async def test_the_cli_never_prints_an_encoded_echo(shape: str) -> None:
    password = PASSWORDS[0]
    async with raw_server(echoing(shape)) as port:
        done = await anyio.to_thread.run_sync(
            lambda: run_cli(
                "-v",
                "call",
                VERIFIED,
                "RequestId=4294967297",
                base_url=f"http://127.0.0.1:{port}",
                username=USER,
                password=password,
            )
        )
    assert done.returncode == 1, done.stderr
    # The CLI reads with llhttp where the speedups extra is installed, as here.
    parser = "llhttp" if importlib.util.find_spec("httptools") else "h11"
    assert_hidden(done.stdout + done.stderr, password, echoed=echoed_with(parser, shape))


def test_a_short_password_is_masked_only_as_a_whole_word() -> None:
    scrub = Scrubber(["p"])
    # Inside a path or a word it is left alone: masking it there would mangle
    # the text and point at the password.
    assert scrub.text("/tmp/spool: open failed") == "/tmp/spool: open failed"
    assert scrub.text("<Password>p</Password> &#x70;") == "<Password>***</Password> ***"
    assert scrub.text('{"Password": "p"}') == '{"Password": "***"}'
