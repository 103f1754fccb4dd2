"""SOAP 1.1 and SOAP 1.2 codecs: envelopes out, envelopes (or faults) in."""

from __future__ import annotations

from itertools import pairwise
from typing import Any, Final

from lxml import etree

from . import _xml
from ._codec import Codec, Credentials, HTTPRequest, R, only_child, read_result
from ._errors import DecodeError, HTTPStatusError
from ._operations import Operation
from ._service import SOAP11_CONTENT_TYPE, SOAP12_CONTENT_TYPE, Binding, soap_action

_DECLARATION: Final = '<?xml version="1.0" encoding="utf-8"?>'

# Envelope head, (opening, closing) tag per parameter, tail, HTTP headers.
_Plan = tuple[str, tuple[tuple[str, str], ...], str, tuple[tuple[str, str], ...]]
# The credentials it was made for, the fixed text around the values, HTTP headers.
_Frame = tuple[Credentials | None, tuple[str, ...], tuple[tuple[str, str], ...]]


class SoapCodec(Codec):
    """Shared by both SOAP versions; subclasses fix the envelope and headers."""

    envelope_namespace: str
    content_type: str

    def soap_action(self, op: Operation[Any]) -> str:
        return f'"{soap_action(self.namespace, op.name)}"'

    def _headers(self, op: Operation[Any]) -> tuple[tuple[str, str], ...]:
        return (("Content-Type", self.content_type),)

    def _build(
        self, op: Operation[Any], texts: tuple[str, ...], credentials: Credentials | None
    ) -> HTTPRequest:
        # Everything but the values is fixed per operation and credentials:
        # built once, so a call joins its values into the fixed pieces.
        key = (op.name, self.namespace, self.endpoint_path)
        frame = self._frames.get(key)
        if frame is None or frame[0] is not credentials:
            frame = self._frames[key] = self._frame(op, credentials)
        _, fixed, headers = frame
        if len(texts) == 1:
            text = fixed[0] + _xml.escape(texts[0]) + fixed[1]
        else:
            parts = [fixed[0]]
            for value, after in zip(texts, fixed[1:], strict=True):
                parts += (_xml.escape(value), after)
            text = "".join(parts)
        return HTTPRequest(
            method="POST",
            path=self.endpoint_path,
            headers=headers,
            body=text.encode("utf-8"),
        )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._frames: dict[tuple[str, str, str], _Frame] = {}
        self._auth: tuple[Credentials, str, str] | None = None

    def _frame(self, op: Operation[Any], credentials: Credentials | None) -> _Frame:
        """The text before, between and after the values of ``op``'s parameters."""
        head, tags, tail, headers = self._plan(op)
        first = head + ("" if credentials is None else self._auth_header(credentials))
        first += "<soap:Body>"
        if not tags:
            return credentials, (first + tail,), headers
        fixed = [first + tags[0][0]]
        fixed += (closing + opening for (_, closing), (opening, _) in pairwise(tags))
        fixed.append(tags[-1][1] + tail)
        return credentials, tuple(fixed), headers

    def _plan(self, op: Operation[Any]) -> _Plan:
        ns = _xml.escape_attr(self.namespace)
        head = f'{_DECLARATION}<soap:Envelope xmlns:soap="{self.envelope_namespace}">'
        tags = tuple((f"<{p.name}>", f"</{p.name}>") for p in op.params)
        if op.params:
            tags = ((f'<{op.name} xmlns="{ns}">' + tags[0][0], tags[0][1]), *tags[1:])
            tail = f"</{op.name}></soap:Body></soap:Envelope>"
        else:
            tail = f'<{op.name} xmlns="{ns}" /></soap:Body></soap:Envelope>'
        return head, tags, tail, self._headers(op)

    def _auth_header(self, credentials: Credentials) -> str:
        # One client sends the same credentials on every call: keep the last text.
        cached = self._auth
        if cached is not None and cached[0] is credentials and cached[1] == self.namespace:
            return cached[2]
        ns = _xml.escape_attr(self.namespace)
        text = (
            f'<soap:Header><AuthenticationHeader xmlns="{ns}">'
            f"<ApiUsername>{_xml.escape(credentials.username)}</ApiUsername>"
            f"<ApiPassword>{_xml.escape(credentials.password)}</ApiPassword>"
            "</AuthenticationHeader></soap:Header>"
        )
        self._auth = (credentials, self.namespace, text)
        return text

    def _result_path(self, op: Operation[Any]) -> tuple[str, ...]:
        env, ns = self.envelope_namespace, self.namespace
        return (
            f"{{{env}}}Envelope",
            f"{{{env}}}Body",
            f"{{{ns}}}{op.response_element}",
            f"{{{ns}}}{op.result_element}",
        )

    def _read(self, op: Operation[R], status: int, root: etree._Element) -> R:
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
        return read_result(op.result, only_child(first, op.result_element), op.result_element)


class Soap11Codec(SoapCodec):
    binding = Binding.SOAP11
    envelope_namespace = _xml.SOAP11_ENV_NS
    content_type = SOAP11_CONTENT_TYPE

    def _headers(self, op: Operation[Any]) -> tuple[tuple[str, str], ...]:
        return (("Content-Type", self.content_type), ("SOAPAction", self.soap_action(op)))


class Soap12Codec(SoapCodec):
    binding = Binding.SOAP12
    envelope_namespace = _xml.SOAP12_ENV_NS
    content_type = SOAP12_CONTENT_TYPE
