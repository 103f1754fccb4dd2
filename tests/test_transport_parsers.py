"""llhttp and h11 read the same bytes the same way: the pool's defences do not depend on which.

Each answer is fed to both readers whole, and again one byte at a time (a
peer that trickles), then the close; what each reports is compared: status,
headers, body, whether the answer is whole, whether the connection may be
reused, and whether the bytes were refused.
"""

from __future__ import annotations

import h11
import pytest

from verif_client._transport import _parse

pytest.importorskip("httptools")

OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: 5\r\n\r\nhello"
ANSWERS: dict[str, bytes] = {
    "content-length": OK,
    "chunked": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n"
    ),
    "gzip-header": OK.replace(b"Content-Type", b"Content-Encoding: gzip\r\nContent-Type"),
    "by-close-http-1.1": b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\n\r\nhello",
    "by-close-http-1.0": b"HTTP/1.0 200 OK\r\nContent-Type: text/xml\r\n\r\nhello",
    "http-1.0-keep-alive": (
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello"
    ),
    "connection-close": OK.replace(b"Content-Type", b"Connection: close\r\nContent-Type"),
    "100-continue-first": b"HTTP/1.1 100 Continue\r\n\r\n" + OK,
    "two-1xx-first": (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\nX-A: 1\r\n\r\n" + OK
    ),
    "101-unasked": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
    "204-no-body": b"HTTP/1.1 204 No Content\r\n\r\n",
    "304-no-body": b"HTTP/1.1 304 Not Modified\r\nETag: x\r\n\r\n",
    # Only Transfer-Encoding frames a body by its chunks, not any header saying "chunked".
    "by-close-with-a-chunked-header": b"HTTP/1.1 200 OK\r\nX-Note: chunked\r\n\r\nhello",
    "bytes-after-the-answer": OK + b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    "garbage-after-the-answer": OK + b"\x00\x01garbage",
    "truncated-body": OK[:-2],
    "truncated-chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n400\r\nabc",
    "truncated-head": b"HTTP/1.1 200 OK\r\nContent-Le",
    "bad-chunk-size": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",
    "two-content-lengths": OK.replace(b"Content-Type: text/xml", b"Content-Length: 7"),
    "bad-content-length": OK.replace(b"Content-Length: 5", b"Content-Length: 5x"),
    "not-http": b"SSH-2.0-OpenSSH_9.2\r\n\r\n",
    "bad-status-line": b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
    "space-in-header-name": b"HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 0\r\n\r\n",
    "head-of-20-kib": b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 20480 + b"\r\n\r\n",
    "head-of-15-kib": b"HTTP/1.1 200 OK\r\nX-Pad: "
    + b"a" * 15000
    + b"\r\nContent-Length: 0\r\n\r\n",
    "many-small-headers": (
        b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 3000 + b"Content-Length: 0\r\n\r\n"
    ),
}


def read(reader_class: type[_parse.Reader], pieces: list[bytes]) -> tuple[object, ...]:
    reader = reader_class()
    reader.start("POST")
    try:
        for piece in [*pieces, b""]:
            if reader.complete:
                break
            reader.feed(piece)
            # The pool starts on the body once headers is not None: only a whole head may be.
            assert reader.headers is None or isinstance(reader.headers, list)
    except h11.RemoteProtocolError:
        # What the pool reports as "RemoteProtocolError: ..."; anything else
        # escapes and fails the test.
        return ("refused",)
    head = None if reader.headers is None else [(n, v) for n, v in reader.headers]
    return (
        reader.status,
        head,
        b"".join(reader.chunks),
        reader.complete,
        reader.complete and reader.reusable(),
    )


@pytest.mark.parametrize("shape", list(ANSWERS))
@pytest.mark.parametrize("pieces", ["whole", "byte-by-byte"])
def test_both_parsers_read_an_answer_alike(shape: str, pieces: str) -> None:
    raw = ANSWERS[shape]
    split = [raw] if pieces == "whole" else [raw[i : i + 1] for i in range(len(raw))]
    if pieces == "byte-by-byte" and len(raw) > 4096:
        split = [raw[i : i + 997] for i in range(0, len(raw), 997)]
    assert read(_parse.LlhttpAnswer, split) == read(_parse.H11Answer, split)


def test_what_both_refuse_and_keep_is_what_the_pool_promises() -> None:
    # The comparison above would pass if both were wrong the same way.
    whole = {shape: read(_parse.LlhttpAnswer, [raw]) for shape, raw in ANSWERS.items()}
    assert whole["content-length"] == (
        200,
        [(b"content-type", b"text/xml"), (b"content-length", b"5")],
        b"hello",
        True,
        True,
    )
    assert whole["chunked"][2:] == (b"hello", True, True)
    assert whole["100-continue-first"] == whole["content-length"]
    for closes in ("by-close-http-1.1", "by-close-http-1.0", "connection-close"):
        assert whole[closes][2:] == (b"hello", True, False), closes
    for after in ("bytes-after-the-answer", "garbage-after-the-answer", "http-1.0-keep-alive"):
        assert whole[after][2:] == (b"hello", True, False), after
    for refused in (
        "101-unasked",
        "truncated-body",
        "truncated-chunked",
        "truncated-head",
        "bad-chunk-size",
        "two-content-lengths",
        "bad-content-length",
        "not-http",
    ):
        assert whole[refused] == ("refused",), refused
    # A head still incomplete past 16 KiB is refused as it streams in.
    for long in ("head-of-20-kib", "many-small-headers"):
        raw = ANSWERS[long]
        streamed = [raw[i : i + 997] for i in range(0, len(raw), 997)]
        assert read(_parse.LlhttpAnswer, streamed) == ("refused",), long
    assert whole["head-of-15-kib"][3:] == (True, True)


@pytest.mark.parametrize(
    ("pieces", "message"),
    [
        ([ANSWERS["101-unasked"]], "101 Switching Protocols was never asked for"),
        ([ANSWERS["truncated-body"], b""], "peer closed connection without sending complete"),
        ([ANSWERS["bad-status-line"]], "HttpParserInvalidStatusError: Invalid response status"),
        ([ANSWERS["not-http"]], "HttpParserError: Expected HTTP/, RTSP/ or ICE/"),
        (
            [b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 9000, b"a" * 9000],
            "answer head too long (over 16384 bytes)",
        ),
    ],
    ids=["101", "truncated-body", "bad-status-line", "not-http", "head-too-long"],
)
def test_what_llhttp_refuses_is_named(pieces: list[bytes], message: str) -> None:
    # The pool reports it as "RemoteProtocolError: <message>": the user's only clue.
    reader = _parse.LlhttpAnswer()
    reader.start("POST")
    *first, last = pieces
    for piece in first:
        reader.feed(piece)
    with pytest.raises(h11.RemoteProtocolError) as refused:
        reader.feed(last)
    assert str(refused.value).startswith(message)
