"""What all four binding codecs share: the request description, parameter
checks, the classification of non-result answers and the generic reading of a
result element against the operation table. No I/O happens here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, TypeVar, overload

import attrs
from lxml import etree

from . import _xml, _xsd
from ._errors import (
    AuthenticationError,
    DecodeError,
    HTTPStatusError,
    RequestValidationError,
    ResponseError,
    ResponseTooLargeError,
    excerpt,
)
from ._faults import find_fault, read_fault
from ._operations import OPERATIONS, Operation, Record, get_operation
from ._service import DEFAULT_NAMESPACE, ENDPOINT_PATH, Binding

DEFAULT_MAX_RESPONSE_BYTES: Final = 1024 * 1024

R = TypeVar("R")

HeaderItems = Iterable[tuple[str, str]] | Mapping[str, str]


def _check_credential(field: str, value: object, *, secret: bool) -> None:
    if not isinstance(value, str):
        raise RequestValidationError(field, "must be a str", value=value, show_value=not secret)
    if _xsd.first_non_xml_char(value) is not None:
        raise RequestValidationError(
            field, "contains a character XML cannot carry", value=value, show_value=not secret
        )


@attrs.frozen(slots=True)
class Credentials:
    """The SOAP AuthenticationHeader. The password never shows in a repr."""

    username: str
    password: str = attrs.field(repr=False)

    def __attrs_post_init__(self) -> None:
        _check_credential("ApiUsername", self.username, secret=False)
        _check_credential("ApiPassword", self.password, secret=True)


@attrs.frozen(slots=True)
class HTTPRequest:
    """A request as plain data: what to send, relative to the base URL.

    The repr leaves the body out, since a SOAP body holds the password.
    """

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes = attrs.field(repr=lambda body: f"<{len(body)} bytes>")

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (case-insensitive), or ``None``."""
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return None


_TITLE = re.compile(rb"<title>\s*(.*?)\s*</title>", re.IGNORECASE | re.DOTALL)


def _first_line(body: bytes) -> str:
    text = _xml.strip_bom(body).decode("utf-8", "replace").strip()
    return text.split("\n", 1)[0].strip()[:500]


def _server_message(body: bytes) -> str:
    """The server's own words: an HTML page's title, else the first line."""
    title = _TITLE.search(body[:8192])
    if title:
        return title.group(1).decode("utf-8", "replace")[:500]
    return _first_line(body)


def _looks_like_xml(body: bytes) -> bool:
    head = _xml.strip_bom(body).lstrip()[:64].lower()
    return head.startswith(b"<") and not head.startswith((b"<!doctype html", b"<html"))


class Codec:
    """Encode requests and decode answers for one binding, without I/O.

    ``encode(operation, params, credentials=...)`` returns an :class:`HTTPRequest`
    whose path is relative to the service's base URL; ``decode(operation,
    status, headers, body)`` returns the operation's typed result or raises a
    :class:`~verif_client.VerifClientError`. ``params`` are keyed by wire name
    (``RequestId``), in any order. ``operation`` is an :class:`Operation`
    constant (``HAS_BEEN_VERIFIED``: ``decode`` is then typed with its result)
    or a wire name (``decode`` then returns ``object``).
    """

    binding: Binding

    def __init__(
        self,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        endpoint_path: str = ENDPOINT_PATH,
        validate: bool = True,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.namespace = namespace
        self.endpoint_path = endpoint_path.rstrip("/")
        self.validate = validate
        self.max_response_bytes = max_response_bytes
        self._result_paths = {op.name: self._result_path(op) for op in OPERATIONS}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.binding.value} namespace={self.namespace!r}>"

    # -- requests ---------------------------------------------------------

    def encode(
        self,
        operation: str | Operation[Any],
        params: Mapping[str, object] | None = None,
        *,
        credentials: Credentials | None = None,
    ) -> HTTPRequest:
        """The HTTP request of one call, with no I/O.

        Args:
            operation: An ``Operation`` constant or an operation's wire name.
            params: The parameters by their wire names.
            credentials: The SOAP AuthenticationHeader (ignored on HTTP GET/POST).

        Returns:
            Method, path (relative to the base URL), headers and body.

        Raises:
            RequestValidationError: A parameter has the wrong type, a character
                XML 1.0 cannot carry, or (unless ``validate=False``) breaks a
                service rule; or the operation is unknown.
        """
        op = get_operation(operation)
        try:
            texts = self.wire_texts(op, params or {})
        except RequestValidationError as exc:
            exc.operation = op.name
            raise
        return self._build(op, texts, credentials)

    def wire_texts(self, op: Operation[Any], params: Mapping[str, object]) -> tuple[str, ...]:
        """Check every parameter and render it as its wire text, in table order."""
        names = op.param_names
        for name in params:
            if name not in names:
                expected = ", ".join(names) or "no parameters"
                raise RequestValidationError(
                    name, f"is not a parameter of {op.name} (expected {expected})"
                )
        texts = []
        for param in op.params:
            if param.name not in params:
                raise RequestValidationError(param.name, "is required")
            value = params[param.name]
            self._check_value(param.name, param.type, value)
            if self.validate and param.rule is not None:
                problem = param.rule(value)
                if problem:
                    raise RequestValidationError(param.name, problem, value=value)
            text = param.type.format(value)
            self._check_text(param.name, text, value)
            texts.append(text)
        return tuple(texts)

    @staticmethod
    def _check_value(name: str, xsd: _xsd.XsdType[Any], value: object) -> None:
        if xsd is _xsd.STRING:
            if not isinstance(value, str):
                raise RequestValidationError(name, "must be a str", value=value)
            bad = _xsd.first_non_xml_char(value)
            if bad is not None:
                raise RequestValidationError(
                    name,
                    f"character {value[bad]!r} at index {bad} is not allowed in XML",
                    value=value,
                )
        elif xsd is _xsd.LONG or xsd is _xsd.INT:
            if not isinstance(value, int) or isinstance(value, bool):
                raise RequestValidationError(name, "must be an int", value=value)
            low, high = (
                (_xsd.LONG_MIN, _xsd.LONG_MAX) if xsd is _xsd.LONG else (_xsd.INT_MIN, _xsd.INT_MAX)
            )
            if not low <= value <= high:
                raise RequestValidationError(
                    name, f"is outside the xsd:{xsd.name} range", value=value
                )

    def _check_text(self, name: str, text: str, value: object) -> None:
        """Binding-specific checks on the rendered text (none by default)."""

    def _build(
        self, op: Operation[Any], texts: tuple[str, ...], credentials: Credentials | None
    ) -> HTTPRequest:
        raise NotImplementedError

    # -- responses --------------------------------------------------------

    @overload
    def decode(
        self, operation: Operation[R], status: int, headers: HeaderItems, body: bytes
    ) -> R: ...
    @overload
    def decode(self, operation: str, status: int, headers: HeaderItems, body: bytes) -> object: ...
    def decode(
        self, operation: str | Operation[Any], status: int, headers: HeaderItems, body: bytes
    ) -> object:
        """The typed result of an answer, with no I/O.

        Args:
            operation: An ``Operation`` constant (the result is typed as its
                result) or a wire name (typed ``object``).
            status: The HTTP status.
            headers: The answer's headers (the Content-Type is not trusted).
            body: The answer's body.

        Returns:
            The operation's result.

        Raises:
            ResponseError: No result in the answer: a ``SoapFault``, an
                ``AuthenticationError``, an ``HTTPStatusError``, a ``DecodeError``
                (never an lxml exception), a ``ResponseTooLargeError``.
        """
        op = get_operation(operation)
        try:
            if len(body) > self.max_response_bytes:
                raise ResponseTooLargeError(self.max_response_bytes)
            root = self._parse_answer(status, body)
            if status == 200:
                # The usual answer, in the configured namespace, is found by one
                # C-level search; anything else takes the tolerant walk below.
                expected = self._expected_result(op, root)
                if expected is not None:
                    return read_result(op.result, expected, op.result_element)
            fault = find_fault(root)
            if fault is not None:
                raise read_fault(fault, status)
            return self._read(op, status, root)
        except ResponseError as exc:
            exc.operation = op.name
            raise

    def _parse_answer(self, status: int, body: bytes) -> etree._Element:
        """Turn the non-XML answers the service is known to give into errors."""
        if status == 401:
            raise AuthenticationError(_server_message(body) or "HTTP 401", status_code=status)
        if not _looks_like_xml(body):
            message = _server_message(body)
            if "invalid api credentials" in message.lower():
                raise AuthenticationError(message, status_code=status)
            if status == 200:
                raise DecodeError(
                    f"expected an XML answer, got {excerpt(message)}", status_code=status
                )
            raise HTTPStatusError(status, message)
        try:
            return _xml.parse(body)
        except _xml.XmlRejected as exc:
            if status != 200:
                raise HTTPStatusError(status, _server_message(body)) from None
            raise DecodeError(str(exc), status_code=status) from None

    def _read(self, op: Operation[R], status: int, root: etree._Element) -> R:
        raise NotImplementedError

    def _result_path(self, op: Operation[Any]) -> tuple[str, ...]:
        """The qualified tags from the document's root down to the result
        element, as the service writes them (the root's own tag first)."""
        raise NotImplementedError

    def _expected_result(self, op: Operation[Any], root: etree._Element) -> etree._Element | None:
        tags = self._result_paths[op.name]
        if root.tag != tags[0]:
            return None
        node = root
        # A plain walk over children: lxml's find() with a path runs Python-level
        # ElementPath code and costs several times as much.
        for tag in tags[1:]:
            for candidate in node:
                if candidate.tag == tag:
                    node = candidate
                    break
            else:
                return None
        if len(tags) > 1:
            for sibling in node.itersiblings():
                if sibling.tag == node.tag:
                    raise DecodeError(REPEATED, element=op.result_element)
        return node


REPEATED: Final = "the element appears more than once"


def only_child(element: etree._Element, name: str) -> etree._Element | None:
    """The child element with this local name; a DecodeError if there are two."""
    found = None
    for candidate in element:
        if _xml.local_name(candidate.tag) == name:
            if found is not None:
                raise DecodeError(REPEATED, element=name)
            found = candidate
    return found


def read_result(shape: _xsd.XsdType[R] | Record[R], element: etree._Element | None, path: str) -> R:
    """Read a result element (the SOAP ``...Result`` or the bare root)."""
    if isinstance(shape, Record):
        if element is None or _xml.is_nil(element):
            raise DecodeError("the service returned no result", element=path)
        return _read_record(shape, element, path)
    value = _read_simple(shape, element, path)
    if value is None:
        if shape is _xsd.STRING:
            # ASMX leaves a null string out; for the consent text "" is the honest reading.
            return shape.parse("")
        raise DecodeError(f"no xsd:{shape.name} value", element=path)
    return value


def _read_simple(
    xsd: _xsd.XsdType[R], element: etree._Element | None, path: str, name: str = ""
) -> R | None:
    """``path`` (plus ``/name`` when given) locates the element in an error;
    joined only then, since nearly every answer reads without one."""
    if element is None or _xml.is_nil(element):
        return None
    text = element.text if len(element) == 0 else _xml.text_of(element)
    if text and not text.isascii():
        text = _xml.restore(text)
    if not text:
        return xsd.parse("") if xsd is _xsd.STRING else None
    try:
        return xsd.parse(text)
    except _xsd.LexicalError as exc:
        raise DecodeError(str(exc), element=f"{path}/{name}" if name else path) from None


def _read_record(record: Record[R], element: etree._Element, path: str) -> R:
    values: dict[str, object] = {}
    by_element = record.by_element
    for node in element:
        tag = node.tag
        if not isinstance(tag, str):
            continue  # the parser drops comments and PIs; kept for hand-made trees
        field = by_element.get(tag[tag.rfind("}") + 1 :])
        if field is None:
            continue  # unknown elements are tolerated for forward compatibility
        if field.attr in values:
            # First-wins and last-wins readers disagree on <Verified>true</Verified>
            # <Verified>false</Verified>: no answer is better than a guessed one.
            raise DecodeError(REPEATED, element=f"{path}/{field.element}")
        if isinstance(field.type, Record):
            values[field.attr] = (
                None
                if _xml.is_nil(node)
                else _read_record(field.type, node, f"{path}/{field.element}")
            )
        else:
            values[field.attr] = _read_simple(field.type, node, path, field.element)
    for field in record.fields:
        if field.required and values.get(field.attr) is None:
            raise DecodeError("required value is missing or nil", element=f"{path}/{field.element}")
    # ASMX leaves null strings and records out entirely: an absent field is None.
    return record.cls(**{field.attr: values.get(field.attr) for field in record.fields})
