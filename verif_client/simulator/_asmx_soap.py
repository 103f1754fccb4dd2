"""The SOAP 1.1 and 1.2 bindings read as ASMX reads them: the routing (SOAPAction,
action=, the body element), the envelope, the AuthenticationHeader, the
parameters, and the faults for each way a request can be wrong, in ASMX's order."""

from __future__ import annotations

import codecs
import re
from typing import Final
from urllib.parse import unquote

import attrs
from lxml import etree

from .. import _xml, _xsd
from .._operations import OPERATIONS, Operation
from .._service import soap_action
from . import _responses as r
from ._asmx_call import CLR_NAMES, Call, Request, convert, media_type
from ._wire import SOAP_ENVELOPES, soap_fault

_ACTION_PARAM: Final = re.compile(r';\s*action\s*=\s*"?([^";]*)"?', re.IGNORECASE)
_CHARSET_PARAM: Final = re.compile(r';\s*charset\s*=\s*"?([^";\s]*)', re.IGNORECASE)
_DECLARED_ENCODING: Final = re.compile(r"""\A(<\?xml[^>]*?\bencoding\s*=\s*)(["'])[^"']*\2""")
_BOMS: Final = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
UNREADABLE: Final = "Server was unable to read request. ---> "
UNPROCESSABLE: Final = "Server was unable to process request. ---> "
SOAP_MEDIA: Final = {"text/xml": "soap11", "application/soap+xml": "soap12"}


class SoapError(Exception):
    """What ASMX answers with a SOAP fault: the binding, the fault code, the reason."""

    def __init__(self, binding: str, code: str, reason: str) -> None:
        super().__init__(reason)
        self.binding = binding
        self.code = code
        self.reason = reason


def fault(binding: str, code: str, reason: str) -> r.Response:
    """A SOAP fault answer, as ASMX writes it for the binding."""
    content_type = r.XML_UTF8 if binding == "soap11" else r.SOAP12_UTF8
    return r.Response(500, content_type, soap_fault(binding, code, reason))


class SoapReader:
    """Reads SOAP calls for one endpoint (its namespace and credentials)."""

    def __init__(
        self,
        *,
        namespace: str,
        credentials: tuple[str, str] | None,
        accept_any_credentials: bool,
        credential_failure: str,
    ) -> None:
        self.namespace = namespace
        self.credentials = credentials
        self.accept_any_credentials = accept_any_credentials
        self.credential_failure = credential_failure
        self._by_action = {soap_action(namespace, op.name): op for op in OPERATIONS}
        self._by_lower_name = {op.name.lower(): op for op in OPERATIONS}

    def call(self, request: Request) -> Call:
        """A POST to the endpoint: a SOAP call, or the fault ASMX answers instead."""
        content_type = request.headers.get("content-type")
        soap_action = request.headers.get("soapaction")
        declared = SOAP_MEDIA.get(media_type(content_type))
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
        except SoapError as exc:
            return attrs.evolve(call, error=fault(exc.binding, exc.code, exc.reason))

    def _action_operation(self, action: str, binding: str) -> Operation:
        op = self._by_action.get(action)
        if op is None:
            raise SoapError(
                binding,
                "Client",
                f"Server did not recognize the value of HTTP Header SOAPAction: {action}.",
            )
        return op

    def _read_envelope(self, request: Request, call: Call) -> Call:
        """The envelope read in ASMX's order: routing, XML, SOAP version,
        Envelope, Header, Body, operation element, parameters, credentials."""
        sent_as = call.binding  # by the Content-Type; the envelope may say otherwise
        op = self._routed(call)
        # Routed by the action, a broken envelope is the caller's ("unable to
        # read", Client); routed by the body element, the router trips over it
        # first and it is the server's ("unable to process", Server).
        broken = ("Client", UNREADABLE) if op is not None else ("Server", UNPROCESSABLE)
        read = self._envelope(request, call, op, broken)
        if isinstance(read, Call):
            return read
        root, call = read
        binding = call.binding
        header, auth = self._header(root)
        username = password = None
        if auth is not None:
            username = self._text(auth, "ApiUsername")
            password = self._text(auth, "ApiPassword")
        element = self._body_element(root, binding, sent_as, broken)
        op = op if op is not None else self._operation_of(element, binding)
        call = attrs.evolve(
            call, operation=op, credentials_present=auth is not None, username=username
        )
        if element is None or element.tag != f"{{{self.namespace}}}{op.name}":
            found = (
                f"<{_xml.local_name(element.tag)} xmlns='{etree.QName(element).namespace or ''}'>"
                if element is not None
                else "The Body element"
            )
            raise SoapError(
                binding, "Client", self._unreadable(element, f"{found} was not expected.")
            )
        received, values = self._values(op, element, binding)
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

    def _routed(self, call: Call) -> Operation | None:
        """The operation the request's headers route it to, if any."""
        if call.binding == "soap11":
            # ASMX routes SOAP 1.1 on the header before it reads a byte of the
            # body, URL-decoding it; only an absent header routes on the body
            # element (an empty one names no operation).
            if call.soap_action is None:
                return None
            return self._action_operation(unquote(_strip_quotes(call.soap_action)), "soap11")
        # SOAP 1.2: an action= it knows routes the call; any other is ignored.
        action_param = _ACTION_PARAM.search(call.content_type or "")
        return self._by_action.get(action_param.group(1)) if action_param else None

    def _envelope(
        self, request: Request, call: Call, op: Operation | None, broken: tuple[str, str]
    ) -> Call | tuple[etree._Element, Call]:
        """The parsed envelope and the call in the envelope's binding, or the
        answer to a body that is no SOAP envelope (or one in the wrong media)."""
        try:
            root = _xml.parse(_as_declared(request.body, call.content_type))
        except _xml.XmlRejected:
            if call.binding == "soap11":
                return attrs.evolve(call, operation=op, error=r.Response(400, None, b""))
            raise SoapError(
                "soap12",
                "Server",
                f"{UNPROCESSABLE}Data at the root level is invalid. Line 1, position 1.",
            ) from None
        # The envelope's namespace, not the Content-Type, says which SOAP it is.
        namespace = etree.QName(root).namespace
        binding = next((b for b, env in SOAP_ENVELOPES.items() if env == namespace), None)
        if binding is None:
            expected_env = SOAP_ENVELOPES[call.binding]
            raise SoapError(
                call.binding,
                "VersionMismatch",
                f"Possible SOAP version mismatch: Envelope namespace "
                f"{namespace} was unexpected. Expecting {expected_env}.",
            )
        if binding == "soap11" and call.binding == "soap12":
            # SOAP 1.1 must come as text/xml; the other way round is allowed.
            return attrs.evolve(call, operation=op, error=r.Response(415, None, b""))
        if _xml.local_name(root.tag) != "Envelope":
            raise SoapError(
                binding,
                broken[0],
                f"{broken[1]}Request format is invalid: Missing required soap:Envelope element.",
            )
        return root, attrs.evolve(call, binding=binding)

    def _header(self, root: etree._Element) -> tuple[etree._Element | None, etree._Element | None]:
        """The Header and its AuthenticationHeader: read only where they
        belong, before the Body."""
        first = _xml.first_element_child(root)
        header = first if first is not None and _xml.local_name(first.tag) == "Header" else None
        if header is None:
            return None, None
        auth_tag = f"{{{self.namespace}}}AuthenticationHeader"
        return header, next((node for node in header if node.tag == auth_tag), None)

    def _body_element(
        self, root: etree._Element, binding: str, sent_as: str, broken: tuple[str, str]
    ) -> etree._Element | None:
        """The Body's first element (the operation's, if all is well)."""
        body = _xml.child(root, "Body")
        if body is None:
            # Sent as SOAP 1.2, the router looks for the Body, action= or not,
            # as it meets malformed XML (above): the server's ("unable to
            # process", Receiver), the envelope's header notwithstanding. Routed
            # by a SOAPAction, the envelope is read after routing and found
            # wanting: the caller's.
            missing = ("Server", UNPROCESSABLE) if sent_as == "soap12" else broken
            raise SoapError(
                binding,
                missing[0],
                f"{missing[1]}Request format is invalid: Missing required soap:Body element.",
            )
        return _xml.first_element_child(body)

    def _operation_of(self, element: etree._Element | None, binding: str) -> Operation:
        """Routed by the body element (no action to route by): its exact name."""
        op = None
        if element is not None and etree.QName(element).namespace == self.namespace:
            op = self._by_lower_name.get(_xml.local_name(element.tag).lower())
            if op is not None and op.name != _xml.local_name(element.tag):
                op = None
        if op is None:
            raise SoapError(
                binding,
                "Client",
                "Unable to handle request without a valid action parameter. "
                "Please supply a valid soap action.",
            )
        return op

    def _values(
        self, op: Operation, element: etree._Element, binding: str
    ) -> tuple[dict[str, str], dict[str, object]]:
        """The parameters as sent (texts) and as XmlSerializer converts them."""
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
                clr = CLR_NAMES.get(param.type.name, param.type.name)
                raise SoapError(
                    binding,
                    "Client",
                    self._unreadable(given, f"Cannot assign null to a non-nullable {clr}."),
                )
            try:
                values[param.attr] = convert(param.type, received[param.name])
            except _xsd.LexicalError:
                raise SoapError(
                    binding,
                    "Client",
                    self._unreadable(given, "Input string was not in a correct format."),
                ) from None
        return received, values

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
                raise SoapError(
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
        return f"{UNREADABLE}There is an error in XML document ({line}, 1). ---> {inner}"


def _strip_quotes(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


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
