"""Reading an answer opens no file and no URL, wherever its DOCTYPE hides.

The DTD names a FIFO: a parser that opened it would block the event loop
until someone writes to it. A watchdog thread stands in for that writer: it
keeps trying to open the FIFO for writing without blocking, which only
succeeds once a reader has opened it. If that ever happens the test fails, and
the watchdog's open and close release the reader, so a regression fails the
test instead of hanging the suite.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import asmx
import httpx
import pytest
from relsupport import fixed

import verif_client as vc
from verif_client.simulator import serve

VERIFIED = vc.get_operation("SecureLink_SecurityCode_HasBeenVerified")
DECLARATION = '<?xml version="1.0" encoding="utf-8"?>'
UTF16_DECLARATION = '<?xml version="1.0" encoding="utf-16"?>'


class Fifo:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.opened = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._done.wait(0.002):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # ENXIO: no reader, the state we want
                    raise
                continue
            self.opened += 1
            os.close(fd)

    def __enter__(self) -> Fifo:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Fifo]:
    path = tmp_path / "dtd.fifo"
    os.mkfifo(path)
    with Fifo(path) as watched:
        yield watched
    assert watched.opened == 0, "the parser opened the file its DTD names"


def _answer(binding: vc.Binding, prologue: str) -> str:
    """HasBeenVerified's answer with ``prologue`` between declaration and root."""
    document = asmx.response(binding, VERIFIED, "<Verified>true</Verified>").decode()
    body = document[len(DECLARATION) :]
    return prologue + body


def _external_dtd(binding: vc.Binding, fifo: Path) -> str:
    root = "soap:Envelope" if binding.is_soap else VERIFIED.bare_root
    return f'<!DOCTYPE {root} SYSTEM "{fifo.as_uri()}">'


def _external_entity(binding: vc.Binding, fifo: Path) -> str:
    root = "soap:Envelope" if binding.is_soap else VERIFIED.bare_root
    return f'<!DOCTYPE {root} [<!ENTITY % p SYSTEM "{fifo}"> %p;]>'


Payload = Callable[[vc.Binding, Path], bytes]


def past_4096_bytes(binding: vc.Binding, fifo: Path) -> bytes:
    padding = f"<!--{' ' * 5000}-->"
    return (DECLARATION + padding + _answer(binding, _external_dtd(binding, fifo))).encode()


def entity_past_4096_bytes(binding: vc.Binding, fifo: Path) -> bytes:
    padding = f"<!--{' ' * 5000}-->"
    return (DECLARATION + padding + _answer(binding, _external_entity(binding, fifo))).encode()


def utf16_with_bom(binding: vc.Binding, fifo: Path) -> bytes:
    text = '<?xml version="1.0" encoding="utf-16"?>' + _answer(
        binding, _external_dtd(binding, fifo)
    )
    return text.encode("utf-16")


def utf16le_without_bom(binding: vc.Binding, fifo: Path) -> bytes:
    text = '<?xml version="1.0" encoding="utf-16"?>' + _answer(
        binding, _external_dtd(binding, fifo)
    )
    return text.encode("utf-16-le")


def utf16be_without_bom(binding: vc.Binding, fifo: Path) -> bytes:
    text = '<?xml version="1.0" encoding="utf-16"?>' + _answer(
        binding, _external_dtd(binding, fifo)
    )
    return text.encode("utf-16-be")


def utf16_declared_utf8(binding: vc.Binding, fifo: Path) -> bytes:
    # A declaration that lies about the bytes it is written in.
    return (DECLARATION + _answer(binding, _external_dtd(binding, fifo))).encode("utf-16-le")


def utf8_declared_utf16(binding: vc.Binding, fifo: Path) -> bytes:
    text = '<?xml version="1.0" encoding="utf-16"?>' + _answer(
        binding, _external_dtd(binding, fifo)
    )
    return text.encode()


def latin1_declared(binding: vc.Binding, fifo: Path) -> bytes:
    text = '<?xml version="1.0" encoding="iso-8859-1"?>'
    return (text + _answer(binding, _external_entity(binding, fifo))).encode("latin-1")


PAYLOADS: list[Payload] = [
    past_4096_bytes,
    entity_past_4096_bytes,
    utf16_with_bom,
    utf16le_without_bom,
    utf16be_without_bom,
    utf16_declared_utf8,
    utf8_declared_utf16,
    latin1_declared,
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda payload: payload.__name__)
@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize("status", [200, 500])
def test_the_codec_refuses_without_opening_the_dtd(
    fifo: Fifo, binding: vc.Binding, payload: Payload, status: int
) -> None:
    with pytest.raises(vc.ResponseError):
        asmx.decode(binding, VERIFIED, payload(binding, fifo.path), status=status)


@pytest.mark.parametrize(
    "encode",
    [
        lambda text: text.encode(),
        lambda text: text.encode("utf-16"),
        lambda text: text.encode("utf-16-le"),
        lambda text: text.encode("utf-16-be"),
    ],
    ids=["utf-8", "utf-16", "utf-16-le", "utf-16-be"],
)
def test_a_harmless_answer_reads_in_every_encoding_the_parser_accepts(
    encode: Callable[[str], bytes],
) -> None:
    from verif_client import _xml

    root = _xml.parse(encode('<?xml version="1.0" encoding="utf-16"?><a>caf\u00e9 \U0001f4f1</a>'))
    assert root.text == "caf\u00e9 \U0001f4f1"


@pytest.mark.anyio
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda payload: payload.__name__)
@pytest.mark.parametrize("binding", list(vc.Binding))
@pytest.mark.parametrize("where", ["in-process", "loopback"])
async def test_a_call_ends_with_a_typed_error_and_opens_nothing(
    fifo: Fifo, binding: vc.Binding, payload: Payload, where: str
) -> None:
    content_type = asmx.content_type(binding).encode()
    app = fixed(200, [(b"content-type", content_type)], payload(binding, fifo.path))
    with anyio.fail_after(20):
        if where == "in-process":
            client = vc.VerificationClient(
                "http://peer", binding=binding, transport=httpx.ASGITransport(app=app), timeout=5
            )
            async with client:
                with pytest.raises(vc.DecodeError):
                    await client.has_been_verified(4294967297)
        else:
            async with serve(app) as server:
                client = vc.VerificationClient(server.base_url, binding=binding, timeout=5)
                async with client:
                    with pytest.raises(vc.DecodeError):
                        await client.has_been_verified(4294967297)
