"""SOAP 1.1 and SOAP 1.2 codecs: envelopes out, envelopes (or faults) in."""

from __future__ import annotations

from typing import Final

from lxml import etree

from . import _xml
from ._codec import Binding, Codec, Credentials, HTTPRequest, read_result
from ._errors import DecodeError, HTTPStatusError
from ._operations import Operation

_DECLARATION: Final = '<?xml version="1.0" encoding="utf-8"?>'


class SoapCodec(Codec):
    """Shared by both SOAP versions; subclasses fix the envelope and headers."""

    envelope_namespace: str
    content_type: str

    def soap_action(self, op: Operation) -> str:
        # ASMX joins namespace and name with one slash, adding it only if missing.
        separator = "" if self.namespace.endswith("/") else "/"
        return f'"{self.namespace}{separator}{op.name}"'

    def _headers(self, op: Operation) -> tuple[tuple[str, str], ...]:
        return (("Content-Type", self.content_type),)

    def _build(
        self, op: Operation, texts: tuple[str, ...], credentials: Credentials | None
    ) -> HTTPRequest:
        ns = _xml.escape(self.namespace).replace('"', "&quot;")
        parts = [
            _DECLARATION,
            f'<soap:Envelope xmlns:soap="{self.envelope_namespace}">',
        ]
        if credentials is not None:
            parts.append(
                f'<soap:Header><AuthenticationHeader xmlns="{ns}">'
                f"<ApiUsername>{_xml.escape(credentials.username)}</ApiUsername>"
                f"<ApiPassword>{_xml.escape(credentials.password)}</ApiPassword>"
                "</AuthenticationHeader></soap:Header>"
            )
        parts.append("<soap:Body>")
        if op.params:
            parts.append(f'<{op.name} xmlns="{ns}">')
            for param, text in zip(op.params, texts, strict=True):
                parts.append(f"<{param.name}>{_xml.escape(text)}</{param.name}>")
            parts.append(f"</{op.name}>")
        else:
            parts.append(f'<{op.name} xmlns="{ns}" />')
        parts.append("</soap:Body></soap:Envelope>")
        return HTTPRequest(
            method="POST",
            path=self.endpoint_path,
            headers=self._headers(op),
            body="".join(parts).encode("utf-8"),
        )

    def _read(self, op: Operation, status: int, root: etree._Element) -> object:
        if _xml.local_name(root.tag) != "Envelope":
            if status != 200:
                raise HTTPStatusError(status, f"<{_xml.local_name(root.tag)}> document")
            raise DecodeError(
                f"expected a SOAP Envelope, got <{_xml.local_name(root.tag)}>", status_code=status
            )
        body = _xml.child(root, "Body")
        first = _xml.first_element_child(body) if body is not None else None
        if status != 200:
            raise HTTPStatusError(status, "SOAP envelope without a fault")
        if first is None:
            raise DecodeError("the SOAP Body is missing or empty", element="Body")
        if _xml.local_name(first.tag) != op.response_element:
            raise DecodeError(
                f"expected <{op.response_element}>, got <{_xml.local_name(first.tag)}>",
                element="Body",
                status_code=status,
            )
        return read_result(op.result, _xml.child(first, op.result_element), op.result_element)


class Soap11Codec(SoapCodec):
    binding = Binding.SOAP11
    envelope_namespace = _xml.SOAP11_ENV_NS
    content_type = "text/xml; charset=utf-8"

    def _headers(self, op: Operation) -> tuple[tuple[str, str], ...]:
        return (("Content-Type", self.content_type), ("SOAPAction", self.soap_action(op)))


class Soap12Codec(SoapCodec):
    binding = Binding.SOAP12
    envelope_namespace = _xml.SOAP12_ENV_NS
    content_type = "application/soap+xml; charset=utf-8"
