"""Content decoding: what each Content-Encoding a peer may send reads as, what
is refused and how, and the bound on what one step may inflate."""

from __future__ import annotations

import gzip
import zlib
from typing import Any

import asmx
import httpx
import pytest

import verif_client as vc
from verif_client._inflate import Inflater

CONSENT = vc.get_operation("GetMobileConsentText")
PLAIN = asmx.response(vc.Binding.SOAP11, CONSENT, "hi")
RAW_DEFLATE = zlib.compress(PLAIN)[2:-4]


async def consent_text_from(body: bytes, content_encoding: str) -> str:
    headers = [(b"content-type", b"text/xml"), (b"content-encoding", content_encoding.encode())]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    transport = httpx.ASGITransport(app=app)
    async with vc.VerificationClient("http://peer", transport=transport, retry=vc.NO_RETRY) as c:
        return await c.get_mobile_consent_text()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("label", "body"),
    [
        ("gzip", gzip.compress(PLAIN)),
        ("x-gzip", gzip.compress(PLAIN)),
        (" GZip ", gzip.compress(PLAIN)),
        ("deflate", zlib.compress(PLAIN)),
        ("deflate", RAW_DEFLATE),
        ("identity", PLAIN),
        ("IDENTITY", PLAIN),
        ("", PLAIN),
    ],
    ids=[
        "gzip",
        "x-gzip",
        "gzip-any-case",
        "deflate",
        "raw-deflate",
        "identity",
        "IDENTITY",
        "none",
    ],
)
async def test_every_encoding_a_peer_may_send_reads_back(label: str, body: bytes) -> None:
    assert await consent_text_from(body, label) == "hi"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("label", "body", "message"),
    [
        ("br", b"\x0b\x00\x80hello\x03", "unsupported Content-Encoding 'br'"),
        # A zlib stream is not gzip: its header is refused, not guessed at.
        ("gzip", zlib.compress(PLAIN), "corrupt compressed body: Error -3 while decompressing"),
        ("gzip", gzip.compress(PLAIN)[:20] + b"\xff" * 40, "corrupt compressed body: Error -3"),
        ("deflate", b"\xff" * 40, "corrupt compressed body: Error -3"),
    ],
    ids=["unasked-br", "zlib-labelled-gzip", "corrupt-gzip", "corrupt-deflate"],
)
async def test_what_cannot_be_decoded_is_a_decode_error_naming_the_operation(
    label: str, body: bytes, message: str
) -> None:
    with pytest.raises(vc.DecodeError) as caught:
        await consent_text_from(body, label)

    assert caught.value.operation == CONSENT.name
    assert str(caught.value).startswith(f"{CONSENT.name}: {message}")


@pytest.mark.parametrize(
    ("label", "compress"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),
    ],
    ids=["gzip", "deflate", "raw-deflate"],
)
@pytest.mark.parametrize("limit", [1, 7, 1000])
def test_one_step_never_inflates_more_than_it_is_allowed(
    label: str, compress: Any, limit: int
) -> None:
    bomb = compress(b"\0" * 1_000_000)

    pieces = Inflater(label, CONSENT.name)(bomb, limit)

    assert sum(map(len, pieces)) == limit


def test_identity_passes_the_bytes_through_untouched() -> None:
    assert Inflater("identity", CONSENT.name)(b"\x1f\x8b not gzip", 3) == [b"\x1f\x8b not gzip"]
