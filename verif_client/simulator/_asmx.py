"""Reading a request the way ASMX does: routing, binding, parameters, credentials.

``AsmxEndpoint.parse`` turns a raw request into a :class:`Call` (the operation
and its converted parameters) or into the error answer ASMX would give, in the
order ASMX checks things. ``AsmxEndpoint.execute`` runs a parsed call against
the service state and writes the answer. Everything is driven by the
operation table; nothing here knows a particular operation.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Final
from urllib.parse import parse_qsl, unquote

import attrs
from lxml import etree

from .. import _xml, _xsd
from .._operations import OPERATIONS, Operation, Param
from .._service import FORM_CONTENT_TYPE, REQUEST_VALIDATION, soap_action
from . import _responses as r
from ._state import ServiceState
from ._wire import SOAP_ENVELOPES, bare_response, soap_fault, soap_response
from ._wsdl import SERVICE_NAME, wsdl_document

_INT64: Final = re.compile(r"[ \t\r\n]*[+-]?[0-9]+[ \t\r\n]*")
_ACTION_PARAM: Final = re.compile(r';\s*action\s*=\s*"?([^";]*)"?', re.IGNORECASE)
THROWN_MESSAGE: Final = "The simulated operation failed."
_CHARSET_PARAM: Final = re.compile(r';\s*charset\s*=\s*"?([^";\s]*)', re.IGNORECASE)
_DECLARED_ENCODING: Final = re.compile(r"""\A(<\?xml[^>]*?\bencoding\s*=\s*)(["'])[^"']*\2""")
_CLR_NAMES: Final = {"long": "System.Int64", "int": "System.Int32", "string": "System.String"}
MAX_QUERY_LENGTH: Final = 2048  # ASP.NET's default maxQueryStringLength
MAX_REQUEST_BYTES: Final = 4 * 1024 * 1024  # ASP.NET's default maxRequestLength
_BOMS: Final = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_UNREADABLE: Final = "Server was unable to read request. ---> "
_UNPROCESSABLE: Final = "Server was unable to process request. ---> "


@attrs.frozen(slots=True)
class Request:
    """What the ASGI layer read: method, decoded path, raw query, headers, body."""

    method: str
    path: str
    query: bytes
    headers: Mapping[str, str]  # lower-cased names
    body: bytes
    host: str
    scheme: str = "http"
    repeated: frozenset[str] = frozenset()
    """Header names (lower-cased) the request carried more than once."""
    server_host: str | None = None
    """The address the simulator serves on (the bound host), if known."""
    too_large: bool = False
    """The body was over ASP.NET's request limit and was not kept."""


def header_map(pairs: Iterable[tuple[str, str]]) -> tuple[dict[str, str], frozenset[str]]:
    """Headers by lower-cased name (repeats joined with ", ", as ASP.NET reads
    them) and the names that were repeated."""
    headers: dict[str, str] = {}
    repeated: set[str] = set()
    for name, value in pairs:
        key = name.lower()
        if key in headers:
            repeated.add(key)
            headers[key] = f"{headers[key]}, {value}"
        else:
            headers[key] = value
    return headers, frozenset(repeated)


@attrs.frozen(slots=True)
class Call:
    """One operation call as read from the wire, or the error answer instead."""

    binding: str
    operation: Operation | None = None
    params: Mapping[str, str] = attrs.field(factory=dict)
    values: Mapping[str, object] = attrs.field(factory=dict)
    credentials_present: bool = False
    username: str | None = None
    soap_action: str | None = None
    content_type: str | None = None
    error: r.Response | None = None


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _strip_quotes(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


_SOAP_MEDIA: Final = {"text/xml": "soap11", "application/soap+xml": "soap12"}


class _SoapError(Exception):
    def __init__(self, binding: str, code: str, reason: str) -> None:
        super().__init__(reason)
        self.binding = binding
        self.code = code
        self.reason = reason


class AsmxEndpoint:
    def __init__(
        self,
        state: ServiceState,
        *,
        namespace: str,
        endpoint_path: str,
        credentials: tuple[str, str] | None,
        accept_any_credentials: bool = False,
        credential_failure: str = "message",
        throws: Collection[str] = (),
    ) -> None:
        self.state = state
        self.credential_failure = credential_failure
        self.namespace = namespace
        self.endpoint_path = endpoint_path.rstrip("/")
        self.credentials = credentials
        self.accept_any_credentials = accept_any_credentials
        self._by_action = {soap_action(namespace, op.name): op for op in OPERATIONS}
        self._by_name = {op.name: op for op in OPERATIONS}
        self._by_lower_name = {op.name.lower(): op for op in OPERATIONS}
        self.throws = frozenset(throws)

    # -- routing --------------------------------------------------------------

    def route(self, request: Request) -> r.Response | Call:
        """An immediate answer (WSDL, help, 404) or a call to the service."""
        path = request.path.lower()
        endpoint = self.endpoint_path.lower()
        if path != endpoint and not path.startswith(endpoint + "/"):
            return r.not_found()
        refused = self._refused_before_routing(request, path == endpoint)
        if refused is not None:
            return refused
        if path == endpoint or (path == endpoint + "/" and request.method != "POST"):
            if request.method in ("GET", "HEAD"):
                keys = {
                    key.lower()
                    for key, _ in parse_qsl(request.query.decode("latin-1"), keep_blank_values=True)
                }
                if "wsdl" in keys:
                    location = f"{request.scheme}://{request.host}{request.path}"
                    return r.Response(200, r.XML_UTF8, wsdl_document(self.namespace, location))
                return r.help_page(SERVICE_NAME, [op.name for op in OPERATIONS])
            if request.method == "POST":
                return self._soap_call(request)
        else:
            # A POST to ".asmx/" names an empty method: not SOAP, and no method.
            name = request.path[len(self.endpoint_path) + 1 :]
            binding = "http-get" if request.method == "GET" else "http-post"
            op = self._by_name.get(name)
            if op is not None and request.method in ("GET", "POST"):
                return self._form_call(request, op)
            # The path is matched in any case (IIS), the method name exactly (ASMX).
            problem = None
            if "/" in name.rstrip("/"):
                problem = "Web Service method name is not valid."
            elif name.lower() in self._by_lower_name:
                proper = self._by_lower_name[name.lower()].name
                problem = (
                    f"Web Service method name is not valid: {name}. Note that method names are "
                    f"case sensitive; did you mean {proper}?"
                )
            if problem is not None and request.method in ("GET", "POST"):
                return Call(
                    binding,
                    error=r.asmx_error(
                        f"System.InvalidOperationException: {problem}",
                        "System.Web.Services.Protocols.HttpServerProtocol.Initialize()",
                        *r.GET_HANDLER,
                    ),
                )
            return Call(
                binding=binding,
                error=r.asmx_error(
                    "System.InvalidOperationException: Request format is unrecognized for URL "
                    f"unexpectedly ending in '/{name}'.",
                    *r.GET_HANDLER,
                ),
            )
        return Call(
            binding="unknown",
            error=r.asmx_error(
                "System.InvalidOperationException: Request format is unrecognized.",
                *r.GET_HANDLER,
            ),
        )

    def _refused_before_routing(self, request: Request, soap_path: bool) -> Call | None:
        """What ASP.NET refuses before ASMX looks at the request, in its order."""
        media = _media_type(request.headers.get("content-type"))
        soap_binding = _SOAP_MEDIA.get(media) if soap_path and request.method == "POST" else None
        binding = soap_binding or ("http-get" if request.method == "GET" else "http-post")
        if len(request.query) > MAX_QUERY_LENGTH:
            return Call(binding, error=r.query_too_long())
        if request.too_large:
            if soap_binding is not None:
                reason = f"{_UNPROCESSABLE}Maximum request length exceeded."
                return Call(soap_binding, error=self._fault(soap_binding, "Server", reason))
            return Call(
                binding,
                error=r.asmx_error(
                    "System.Web.HttpException (0x80004005): Maximum request length exceeded."
                ),
            )
        if request.method == "POST" and "content-type" in request.repeated:
            return Call(binding, error=r.Response(415, None, b""))
        return None

    # -- HTTP GET / POST ------------------------------------------------------

    def _form_call(self, request: Request, op: Operation) -> Call:
        binding = "http-get" if request.method == "GET" else "http-post"
        content_type = request.headers.get("content-type")
        source: str
        if binding == "http-post":
            if op.params and _media_type(content_type) != FORM_CONTENT_TYPE:
                return Call(
                    binding,
                    op,
                    content_type=content_type,
                    error=r.asmx_error(
                        "System.InvalidOperationException: Request format is invalid: "
                        f"{content_type or ''}.",
                        *r.READ_PARAMETERS,
                    ),
                )
            raw = request.body if _media_type(content_type) == FORM_CONTENT_TYPE else b""
            source = "Request.Form"
        else:
            raw = request.query
            source = "Request.QueryString"
        received: dict[str, str] = {}
        # ASP.NET's collections are case-insensitive and join repeated names with commas.
        by_lower: dict[str, str] = {}
        for key, value in parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True):
            first = by_lower.setdefault(key.lower(), key)
            received[first] = f"{received[first]},{value}" if first in received else value
        credentials_present = "authorization" in request.headers or any(
            key in by_lower for key in ("apiusername", "apipassword")
        )
        call = Call(
            binding,
            op,
            params=received,
            credentials_present=credentials_present,
            content_type=content_type,
        )
        values: dict[str, object] = {}
        for param in op.params:
            found = by_lower.get(param.name.lower())
            text = received.get(found) if found is not None else None
            error = self._form_value(param, text, source, binding, values)
            if error is not None:
                return attrs.evolve(call, error=error)
        return attrs.evolve(call, values=values)

    @staticmethod
    def _form_value(
        param: Param, text: str | None, source: str, binding: str, values: dict[str, object]
    ) -> r.Response | None:
        reader = r.PARAMETER_READERS[binding]
        if text is not None:
            match = REQUEST_VALIDATION.search(text)
            if match:
                return r.asmx_error(
                    "System.Web.HttpRequestValidationException (0x80004005): A potentially "
                    f"dangerous {source} value was detected from the client "
                    f"({_validation_excerpt(param.name, text, match.start())}).",
                    "System.Web.HttpRequest.ValidateString(String value, String collectionKey, "
                    "RequestValidationSource requestCollection)",
                    f"System.Web.HttpRequest.get_{source.split('.')[1]}()",
                    reader,
                    *r.READ_PARAMETERS,
                )
        if text is None:
            return r.asmx_error(
                f"System.InvalidOperationException: Missing parameter: {param.name}.",
                "System.Web.Services.Protocols.ValueCollectionParameterReader.Read("
                "NameValueCollection collection)",
                reader,
                *r.READ_PARAMETERS,
            )
        try:
            values[param.attr] = _convert(param.type, text)
        except _xsd.LexicalError:
            clr = _CLR_NAMES.get(param.type.name, param.type.name)
            return r.asmx_error(
                f"System.ArgumentException: Cannot convert {text} to {clr}.\r\n"
                "Parameter name: type ---> System.FormatException: Input string was not in a "
                "correct format.",
                "System.Web.Services.Protocols.ScalarFormatter.FromString(String value, Type type)",
                "System.Web.Services.Protocols.ValueCollectionParameterReader.Read("
                "NameValueCollection collection)",
                reader,
                *r.READ_PARAMETERS,
            )
        return None

    # -- SOAP -----------------------------------------------------------------

    def _soap_call(self, request: Request) -> Call:
        content_type = request.headers.get("content-type")
        soap_action = request.headers.get("soapaction")
        declared = _SOAP_MEDIA.get(_media_type(content_type))
        if declared is None:
            return Call(
                "unknown",
                soap_action=soap_action,
                content_type=content_type,
                error=r.asmx_error(
                    "System.InvalidOperationException: Request format is invalid: "
                    f"{content_type or ''}.",
                    *r.READ_PARAMETERS,
                ),
            )
        call = Call(declared, soap_action=soap_action, content_type=content_type)
        try:
            return self._read_envelope(request, call)
        except _SoapError as exc:
            return attrs.evolve(call, error=self._fault(exc.binding, exc.code, exc.reason))

    def _fault(self, binding: str, code: str, reason: str) -> r.Response:
        content_type = r.XML_UTF8 if binding == "soap11" else r.SOAP12_UTF8
        return r.Response(500, content_type, soap_fault(binding, code, reason))

    def _action_operation(self, action: str, binding: str) -> Operation:
        op = self._by_action.get(action)
        if op is None:
            raise _SoapError(
                binding,
                "Client",
                f"Server did not recognize the value of HTTP Header SOAPAction: {action}.",
            )
        return op

    def _read_envelope(self, request: Request, call: Call) -> Call:
        op: Operation | None = None
        sent_as = call.binding  # by the Content-Type; the envelope may say otherwise
        if call.binding == "soap11":
            # ASMX routes SOAP 1.1 on the header before it reads a byte of the
            # body, URL-decoding it; only an absent header routes on the body
            # element (an empty one names no operation).
            if call.soap_action is not None:
                op = self._action_operation(unquote(_strip_quotes(call.soap_action)), "soap11")
        else:
            # SOAP 1.2: an action= it knows routes the call; any other is ignored.
            action_param = _ACTION_PARAM.search(call.content_type or "")
            op = self._by_action.get(action_param.group(1)) if action_param else None
        # Routed by the action, a broken envelope is the caller's ("unable to
        # read", Client); routed by the body element, the router trips over it
        # first and it is the server's ("unable to process", Server).
        broken = ("Client", _UNREADABLE) if op is not None else ("Server", _UNPROCESSABLE)
        try:
            root = _xml.parse(_as_declared(request.body, call.content_type))
        except _xml.XmlRejected:
            if call.binding == "soap11":
                return attrs.evolve(call, operation=op, error=r.Response(400, None, b""))
            raise _SoapError(
                "soap12",
                "Server",
                f"{_UNPROCESSABLE}Data at the root level is invalid. Line 1, position 1.",
            ) from None
        # The envelope's namespace, not the Content-Type, says which SOAP it is.
        namespace = etree.QName(root).namespace
        binding = next((b for b, env in SOAP_ENVELOPES.items() if env == namespace), None)
        if binding is None:
            expected_env = SOAP_ENVELOPES[call.binding]
            raise _SoapError(
                call.binding,
                "VersionMismatch",
                f"Possible SOAP version mismatch: Envelope namespace "
                f"{namespace} was unexpected. Expecting {expected_env}.",
            )
        if binding == "soap11" and call.binding == "soap12":
            # SOAP 1.1 must come as text/xml; the other way round is allowed.
            return attrs.evolve(call, operation=op, error=r.Response(415, None, b""))
        call = attrs.evolve(call, binding=binding)
        if _xml.local_name(root.tag) != "Envelope":
            raise _SoapError(
                binding,
                broken[0],
                f"{broken[1]}Request format is invalid: Missing required soap:Envelope element.",
            )
        # Headers are read only where they belong, before the Body.
        first = _xml.first_element_child(root)
        header = first if first is not None and _xml.local_name(first.tag) == "Header" else None
        auth = None
        if header is not None:
            auth = next(
                (
                    node
                    for node in header
                    if node.tag == f"{{{self.namespace}}}AuthenticationHeader"
                ),
                None,
            )
        username = password = None
        if auth is not None:
            username = self._text(auth, "ApiUsername")
            password = self._text(auth, "ApiPassword")
        body = _xml.child(root, "Body")
        if body is None:
            # Sent as SOAP 1.2, the router looks for the Body, action= or not,
            # as it meets malformed XML (above): the server's ("unable to
            # process", Receiver), the envelope's header notwithstanding. Routed
            # by a SOAPAction, the envelope is read after routing and found
            # wanting: the caller's.
            missing = ("Server", _UNPROCESSABLE) if sent_as == "soap12" else broken
            raise _SoapError(
                binding,
                missing[0],
                f"{missing[1]}Request format is invalid: Missing required soap:Body element.",
            )
        element = _xml.first_element_child(body)
        if op is None:
            if element is not None and etree.QName(element).namespace == self.namespace:
                op = self._by_lower_name.get(_xml.local_name(element.tag).lower())
                if op is not None and op.name != _xml.local_name(element.tag):
                    op = None
            if op is None:
                raise _SoapError(
                    binding,
                    "Client",
                    "Unable to handle request without a valid action parameter. "
                    "Please supply a valid soap action.",
                )
        call = attrs.evolve(
            call, operation=op, credentials_present=auth is not None, username=username
        )
        if element is None or element.tag != f"{{{self.namespace}}}{op.name}":
            found = (
                f"<{_xml.local_name(element.tag)} xmlns='{etree.QName(element).namespace or ''}'>"
                if element is not None
                else "The Body element"
            )
            raise _SoapError(
                binding, "Client", self._unreadable(element, f"{found} was not expected.")
            )
        received: dict[str, str] = {}
        nodes: dict[str, etree._Element] = {}
        for node in element:
            # XmlSerializer skips elements outside the service namespace: they stay null.
            if isinstance(node.tag, str) and etree.QName(node).namespace == self.namespace:
                name = _xml.local_name(node.tag)
                received[name] = _xml.text_of(node)
                nodes[name] = node
        values: dict[str, object] = {}
        for param in op.params:
            given = nodes.get(param.name)
            if given is None:
                values[param.attr] = None if param.type is _xsd.STRING else 0
                continue
            if _xml.is_nil(given):
                if param.type is _xsd.STRING:
                    values[param.attr] = None
                    continue
                # A long is not nullable: XmlSerializer refuses the nil.
                clr = _CLR_NAMES.get(param.type.name, param.type.name)
                raise _SoapError(
                    binding,
                    "Client",
                    self._unreadable(given, f"Cannot assign null to a non-nullable {clr}."),
                )
            try:
                values[param.attr] = _convert(param.type, received[param.name])
            except _xsd.LexicalError:
                raise _SoapError(
                    binding,
                    "Client",
                    self._unreadable(given, "Input string was not in a correct format."),
                ) from None
        call = attrs.evolve(call, params=received, values=values)
        if header is not None:
            self._check_must_understand(header, binding)
        if not self._authenticated(username, password):
            failure = (
                r.unauthorized()
                if self.credential_failure == "http-401"
                else r.invalid_credentials()
            )
            return attrs.evolve(call, error=failure)
        return call

    def _authenticated(self, username: str | None, password: str | None) -> bool:
        """The service answers a missing or empty AuthenticationHeader as a wrong one."""
        if self.accept_any_credentials:
            return True
        if self.credentials is not None:
            return (username, password) == self.credentials
        return bool(username) and bool(password)

    def _check_must_understand(self, header: etree._Element, binding: str) -> None:
        """A header the service does not declare, marked mustUnderstand, is a fault."""
        env = SOAP_ENVELOPES[binding]
        for node in header:
            if not isinstance(node.tag, str):
                continue
            if node.tag == f"{{{self.namespace}}}AuthenticationHeader":
                continue
            if node.get(f"{{{env}}}mustUnderstand") in ("1", "true"):
                raise _SoapError(
                    binding,
                    "MustUnderstand",
                    f"SOAP header {_xml.local_name(node.tag)} was not understood.",
                )

    @staticmethod
    def _text(parent: etree._Element, name: str) -> str | None:
        node = _xml.child(parent, name)
        return None if node is None else _xml.text_of(node)

    @staticmethod
    def _unreadable(node: etree._Element | None, inner: str) -> str:
        line = node.sourceline if node is not None and node.sourceline else 1
        return f"{_UNREADABLE}There is an error in XML document ({line}, 1). ---> {inner}"

    # -- running a call ---------------------------------------------------------

    def execute(self, call: Call) -> r.Response:
        assert call.operation is not None
        assert call.error is None
        op = call.operation
        if op.name in self.throws:
            return self._thrown(op, call.binding)
        handler = getattr(self.state, op.method)
        value = handler(**call.values)
        if call.binding in SOAP_ENVELOPES:
            content_type = r.XML_UTF8 if call.binding == "soap11" else r.SOAP12_UTF8
            return r.Response(
                200, content_type, soap_response(op, value, self.namespace, call.binding)
            )
        return r.Response(200, r.XML_UTF8, bare_response(op, value, self.namespace))

    def _thrown(self, op: Operation, binding: str) -> r.Response:
        """What ASMX sends when the web method itself throws."""
        if binding in SOAP_ENVELOPES:
            reason = f"{_UNPROCESSABLE}{THROWN_MESSAGE}"
            return self._fault(binding, "Server", reason)
        return r.asmx_error(
            f"System.Exception: {THROWN_MESSAGE}",
            f"{SERVICE_NAME}.{op.name}()",
            "System.Web.Services.Protocols.LogicalMethodInfo.Invoke(Object target, "
            "Object[] values)",
            "System.Web.Services.Protocols.WebServiceHandler.Invoke()",
            "System.Web.Services.Protocols.WebServiceHandler.CoreProcessRequest()",
        )


def _as_declared(body: bytes, content_type: str | None) -> bytes:
    """The body as ASMX reads it: a charset in the Content-Type wins over the
    document's own declaration (only a byte order mark beats it), and a byte
    that is not of that charset becomes U+FFFD instead of an error."""
    match = _CHARSET_PARAM.search(content_type or "")
    if match is None or body.startswith(_BOMS):
        return body
    try:
        charset = codecs.lookup(match.group(1)).name
    except LookupError:
        return body
    text = body.decode(charset, "replace")
    # Handed on as UTF-8, so a declaration must now say UTF-8.
    return _DECLARED_ENCODING.sub(r"\1\2utf-8\2", text, count=1).encode("utf-8")


def _convert(xsd: _xsd.XsdType, text: str) -> object:
    """A parameter's text as .NET converts it (Int64.Parse trims XML whitespace)."""
    if xsd is _xsd.STRING:
        return text
    if xsd is _xsd.LONG or xsd is _xsd.INT:
        if not _INT64.fullmatch(text):
            raise _xsd.LexicalError(text)
        number = int(text.strip())
        low, high = (
            (_xsd.LONG_MIN, _xsd.LONG_MAX) if xsd is _xsd.LONG else (_xsd.INT_MIN, _xsd.INT_MAX)
        )
        if not low <= number <= high:
            raise _xsd.LexicalError(text)
        return number
    return xsd.parse(text)


def _validation_excerpt(name: str, value: str, index: int) -> str:
    """ASP.NET's excerpt of a refused value: up to 10 characters before, 20 after."""
    start = max(index - 10, 0)
    end = index + 20
    prefix = "..." if start > 0 else ""
    if end >= len(value):
        return f'{name}="{prefix}{value[start:]}"'
    return f'{name}="{prefix}{value[start:end]}..."'
