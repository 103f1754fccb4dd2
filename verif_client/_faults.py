"""Reading SOAP 1.1 and 1.2 Faults, whatever binding they arrive on."""

from __future__ import annotations

from typing import Final

from lxml import etree

from . import _xml
from ._errors import SoapFault


def find_fault(root: etree._Element) -> etree._Element | None:
    """The Fault element of a SOAP envelope, if the document is one."""
    if _xml.local_name(root.tag) != "Envelope":
        return None
    body = _xml.child(root, "Body")
    first = _xml.first_element_child(body) if body is not None else None
    if first is not None and _xml.local_name(first.tag) == "Fault":
        return first
    return None


def _qname_local(text: str | None) -> str:
    value = (text or "").strip()
    return value.rsplit(":", 1)[-1]


def _optional_text(element: etree._Element | None) -> str | None:
    if element is None:
        return None
    return _xml.text_of(element).strip() or None


_XML_LANG: Final = "{http://www.w3.org/XML/1998/namespace}lang"


def _reason_text(reason: etree._Element | None) -> str:
    """The English soap:Reason/soap:Text if there is one, else the first."""
    if reason is None:
        return ""
    texts = [node for node in reason if _xml.local_name(node.tag) == "Text"]
    english = [node for node in texts if (node.get(_XML_LANG) or "").startswith("en")]
    chosen = english or texts
    return (_optional_text(chosen[0]) or "") if chosen else ""


def read_fault(fault: etree._Element, status: int) -> SoapFault:
    code = _xml.child(fault, "Code")
    if code is not None:  # SOAP 1.2 shape
        subcode = _xml.child(code, "Subcode")
        return SoapFault(
            code=_qname_local(_optional_text(_xml.child(code, "Value"))),
            subcode=(
                _qname_local(_optional_text(_xml.child(subcode, "Value")))
                if subcode is not None
                else None
            ),
            reason=_reason_text(_xml.child(fault, "Reason")),
            detail=_optional_text(_xml.child(fault, "Detail")),
            soap_version="1.2",
            status_code=status,
        )
    return SoapFault(
        code=_qname_local(_optional_text(_xml.child(fault, "faultcode"))),
        reason=_optional_text(_xml.child(fault, "faultstring")) or "",
        detail=_optional_text(_xml.child(fault, "detail")),
        soap_version="1.1",
        status_code=status,
    )
