"""The ``?WSDL`` document, generated from the operation table as ASP.NET does.

Layout, names and occurrence rules follow ASMX's generator: one
document/literal-wrapped schema, messages ``{op}SoapIn``/``SoapOut``/
``AuthenticationHeader``/``HttpGetIn``/..., port types and bindings for SOAP
1.1, SOAP 1.2, HTTP GET and HTTP POST, and one service with four ports.
Strings and records are ``minOccurs="0"``; value types are ``minOccurs="1"``,
nillable when .NET would declare them ``Nullable<T>`` (not required in the
table). HTTP GET/POST parts are all ``s:string``, as ASMX declares them.
"""

from __future__ import annotations

from typing import Final

from lxml import etree

from .. import _xsd
from .._operations import OPERATIONS, Field, Record
from .._service import FORM_CONTENT_TYPE, soap_action
from ._wire import DECLARATION, is_nullable_value

SERVICE_NAME: Final = "InquiriesWS"
"""The ASMX class name is not public; this is the simulator's choice."""

WSDL: Final = "http://schemas.xmlsoap.org/wsdl/"
XS: Final = "http://www.w3.org/2001/XMLSchema"
_NSMAP: Final = {
    "soap": "http://schemas.xmlsoap.org/wsdl/soap/",
    "tm": "http://microsoft.com/wsdl/mime/textMatching/",
    "soapenc": "http://schemas.xmlsoap.org/soap/encoding/",
    "mime": "http://schemas.xmlsoap.org/wsdl/mime/",
    "s": XS,
    "soap12": "http://schemas.xmlsoap.org/wsdl/soap12/",
    "http": "http://schemas.xmlsoap.org/wsdl/http/",
    "wsdl": WSDL,
}
_HTTP_TRANSPORT: Final = "http://schemas.xmlsoap.org/soap/http"
_VERBS: Final = (("HttpGet", "GET"), ("HttpPost", "POST"))


def _q(prefix: str, name: str) -> str:
    return f"{{{_NSMAP[prefix]}}}{name}"


def _sub(parent: etree._Element, prefix: str, local: str, /, **attributes: str) -> etree._Element:
    return etree.SubElement(parent, _q(prefix, local), attributes)


class _Schema:
    """The ``s:schema`` of the types section, records declared once each."""

    def __init__(self, parent: etree._Element, namespace: str) -> None:
        self.node = _sub(
            parent, "s", "schema", elementFormDefault="qualified", targetNamespace=namespace
        )
        self.declared: set[str] = set()

    def element(self, name: str, *members: dict[str, str]) -> None:
        node = _sub(self.node, "s", "element", name=name)
        complex_type = _sub(node, "s", "complexType")
        if members:
            sequence = _sub(complex_type, "s", "sequence")
            for attributes in members:
                _sub(sequence, "s", "element", **attributes)

    def record(self, name: str, record: Record) -> None:
        if name in self.declared:
            return
        self.declared.add(name)
        complex_type = _sub(self.node, "s", "complexType", name=name)
        sequence = _sub(complex_type, "s", "sequence")
        nested: list[tuple[str, Record]] = []
        for field in record.fields:
            _sub(sequence, "s", "element", **_occurs(field))
            if isinstance(field.type, Record):
                nested.append((field.element, field.type))
        for nested_name, nested_record in nested:
            self.record(nested_name, nested_record)


def _type_name(field: Field) -> str:
    if isinstance(field.type, Record):
        return f"tns:{field.element}"
    return f"s:{field.type.name}"


def _occurs(field: Field, type_name: str | None = None) -> dict[str, str]:
    """The attributes of a sequence member, in the order ASP.NET writes them."""
    optional = isinstance(field.type, Record) or field.type is _xsd.STRING
    attributes = {"minOccurs": "0" if optional else "1", "maxOccurs": "1", "name": field.element}
    if not optional and is_nullable_value(field):
        attributes["nillable"] = "true"
    attributes["type"] = type_name or _type_name(field)
    return attributes


def _types(root: etree._Element, namespace: str) -> None:
    schema = _Schema(_sub(root, "wsdl", "types"), namespace)
    for op in OPERATIONS:
        schema.element(
            op.name,
            *(
                _occurs(Field(param.name, param.attr, param.type, required=True))
                for param in op.params
            ),
        )
        result_type = f"tns:{op.bare_root}" if isinstance(op.result, Record) else None
        result = Field(op.result_element, "", op.result, required=True)
        schema.element(op.response_element, _occurs(result, result_type))
        if isinstance(op.result, Record):
            schema.record(op.bare_root, op.result)
        if "AuthenticationHeader" not in schema.declared:
            schema.declared.add("AuthenticationHeader")
            _sub(
                schema.node,
                "s",
                "element",
                name="AuthenticationHeader",
                type="tns:AuthenticationHeader",
            )
            header = _sub(schema.node, "s", "complexType", name="AuthenticationHeader")
            sequence = _sub(header, "s", "sequence")
            for name in ("ApiUsername", "ApiPassword"):
                _sub(
                    sequence,
                    "s",
                    "element",
                    minOccurs="0",
                    maxOccurs="1",
                    name=name,
                    type="s:string",
                )
            _sub(header, "s", "anyAttribute")
    roots: set[str] = set()
    for op in OPERATIONS:
        if op.bare_root in roots:
            continue
        roots.add(op.bare_root)
        if isinstance(op.result, Record):
            attributes = {"nillable": "true", "type": f"tns:{op.bare_root}"}
        elif op.result is _xsd.STRING:
            attributes = {"nillable": "true", "type": "s:string"}
        else:
            attributes = {"type": f"s:{op.result.name}"}
        _sub(schema.node, "s", "element", name=op.bare_root, **attributes)


def _messages(root: etree._Element) -> None:
    def message(name: str, *parts: dict[str, str]) -> None:
        node = _sub(root, "wsdl", "message", name=name)
        for part in parts:
            _sub(node, "wsdl", "part", **part)

    for op in OPERATIONS:
        message(f"{op.name}SoapIn", {"name": "parameters", "element": f"tns:{op.name}"})
        message(
            f"{op.name}SoapOut", {"name": "parameters", "element": f"tns:{op.response_element}"}
        )
        message(
            f"{op.name}AuthenticationHeader",
            {"name": "AuthenticationHeader", "element": "tns:AuthenticationHeader"},
        )
    for suffix, _verb in _VERBS:
        for op in OPERATIONS:
            message(
                f"{op.name}{suffix}In",
                *({"name": param.name, "type": "s:string"} for param in op.params),
            )
            message(f"{op.name}{suffix}Out", {"name": "Body", "element": f"tns:{op.bare_root}"})


def _port_types(root: etree._Element) -> None:
    for suffix, messages in (("Soap", "Soap"), ("HttpGet", "HttpGet"), ("HttpPost", "HttpPost")):
        port_type = _sub(root, "wsdl", "portType", name=f"{SERVICE_NAME}{suffix}")
        for op in OPERATIONS:
            node = _sub(port_type, "wsdl", "operation", name=op.name)
            _sub(node, "wsdl", "documentation").text = op.doc
            _sub(node, "wsdl", "input", message=f"tns:{op.name}{messages}In")
            _sub(node, "wsdl", "output", message=f"tns:{op.name}{messages}Out")


def _soap_binding(root: etree._Element, prefix: str, suffix: str, namespace: str) -> None:
    binding = _sub(
        root, "wsdl", "binding", name=f"{SERVICE_NAME}{suffix}", type=f"tns:{SERVICE_NAME}Soap"
    )
    _sub(binding, prefix, "binding", transport=_HTTP_TRANSPORT)
    for op in OPERATIONS:
        node = _sub(binding, "wsdl", "operation", name=op.name)
        _sub(
            node,
            prefix,
            "operation",
            soapAction=soap_action(namespace, op.name),
            style="document",
        )
        request = _sub(node, "wsdl", "input")
        _sub(request, prefix, "body", use="literal")
        _sub(
            request,
            prefix,
            "header",
            message=f"tns:{op.name}AuthenticationHeader",
            part="AuthenticationHeader",
            use="literal",
        )
        _sub(_sub(node, "wsdl", "output"), prefix, "body", use="literal")


def _http_binding(root: etree._Element, suffix: str, verb: str) -> None:
    binding = _sub(
        root, "wsdl", "binding", name=f"{SERVICE_NAME}{suffix}", type=f"tns:{SERVICE_NAME}{suffix}"
    )
    _sub(binding, "http", "binding", verb=verb)
    for op in OPERATIONS:
        node = _sub(binding, "wsdl", "operation", name=op.name)
        _sub(node, "http", "operation", location=f"/{op.name}")
        request = _sub(node, "wsdl", "input")
        if verb == "GET":
            _sub(request, "http", "urlEncoded")
        else:
            _sub(request, "mime", "content", type=FORM_CONTENT_TYPE)
        _sub(_sub(node, "wsdl", "output"), "mime", "mimeXml", part="Body")


def wsdl_document(namespace: str, location: str) -> bytes:
    """The WSDL of the six operations, with ``location`` as every port's address."""
    root = etree.Element(
        _q("wsdl", "definitions"), nsmap={**_NSMAP, "tns": namespace}, targetNamespace=namespace
    )
    _types(root, namespace)
    _messages(root)
    _port_types(root)
    _soap_binding(root, "soap", "Soap", namespace)
    _soap_binding(root, "soap12", "Soap12", namespace)
    for suffix, verb in _VERBS:
        _http_binding(root, suffix, verb)
    service = _sub(root, "wsdl", "service", name=SERVICE_NAME)
    for suffix, prefix in (
        ("Soap", "soap"),
        ("Soap12", "soap12"),
        ("HttpGet", "http"),
        ("HttpPost", "http"),
    ):
        port = _sub(
            service,
            "wsdl",
            "port",
            name=f"{SERVICE_NAME}{suffix}",
            binding=f"tns:{SERVICE_NAME}{suffix}",
        )
        _sub(port, prefix, "address", location=location)
    text = etree.tostring(root, encoding="unicode", pretty_print=True)
    return f"{DECLARATION}\n{text}".encode()
