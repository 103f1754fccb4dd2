"""HTTP GET and HTTP POST codecs: parameters as query or form text, bare XML back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote, quote_plus

from lxml import etree

from . import _xml
from ._codec import Codec, Credentials, HTTPRequest, R, read_result
from ._errors import DecodeError, HTTPStatusError, RequestValidationError
from ._operations import Operation
from ._service import FORM_CONTENT_TYPE, REQUEST_VALIDATION, Binding


class _PlainHttpCodec(Codec):
    """Shared by GET and POST: validation of form values and the bare answer."""

    def _check_text(self, name: str, text: str, value: object) -> None:
        if self.validate and REQUEST_VALIDATION.search(text):
            raise RequestValidationError(
                name,
                "contains '<' followed by a letter, '!', '/' or '?', or '&#', which ASP.NET "
                "request validation refuses on HTTP GET/POST; send it over SOAP 1.1 or 1.2",
                value=value,
            )

    def _result_path(self, op: Operation[Any]) -> tuple[str, ...]:
        return (f"{{{self.namespace}}}{op.bare_root}",)

    def _read(self, op: Operation[R], status: int, root: etree._Element) -> R:
        name = _xml.local_name(root.tag)
        if status != 200:
            raise HTTPStatusError(status, f"<{name}> document")
        if name != op.bare_root:
            raise DecodeError(f"expected <{op.bare_root}>, got <{name}>", status_code=status)
        return read_result(op.result, root, op.bare_root)

    @staticmethod
    def _pairs(op: Operation[Any], texts: tuple[str, ...], quoter: Callable[..., str]) -> str:
        return "&".join(
            f"{param.name}={quoter(text, safe='')}"
            for param, text in zip(op.params, texts, strict=True)
        )


class HttpGetCodec(_PlainHttpCodec):
    binding = Binding.HTTP_GET

    def _build(
        self, op: Operation[Any], texts: tuple[str, ...], credentials: Credentials | None
    ) -> HTTPRequest:
        query = self._pairs(op, texts, quote)
        path = f"{self.endpoint_path}/{op.name}"
        return HTTPRequest(
            method="GET", path=f"{path}?{query}" if query else path, headers=(), body=b""
        )


class HttpPostCodec(_PlainHttpCodec):
    binding = Binding.HTTP_POST

    def _build(
        self, op: Operation[Any], texts: tuple[str, ...], credentials: Credentials | None
    ) -> HTTPRequest:
        # The Content-Type goes on every POST, the empty one included: ASMX refuses
        # a POST without it, and an HTTP library sends none for an empty body.
        return HTTPRequest(
            method="POST",
            path=f"{self.endpoint_path}/{op.name}",
            headers=(("Content-Type", FORM_CONTENT_TYPE),),
            body=self._pairs(op, texts, quote_plus).encode("ascii"),
        )
