"""The HTTP GET and POST bindings read as ASMX reads them: parameters from the
query string or the form, ASP.NET's request validation, .NET's conversions."""

from __future__ import annotations

from urllib.parse import parse_qsl

import attrs

from .. import _xsd
from .._operations import Operation, Param
from .._service import FORM_CONTENT_TYPE, REQUEST_VALIDATION
from . import _responses as r
from ._asmx_call import CLR_NAMES, Call, Request, convert, media_type


def form_call(request: Request, op: Operation) -> Call:
    """An HTTP GET or POST call: its parameters from the query or the form, as ASMX reads them."""
    binding = "http-get" if request.method == "GET" else "http-post"
    content_type = request.headers.get("content-type")
    source: str
    if binding == "http-post":
        if op.params and media_type(content_type) != FORM_CONTENT_TYPE:
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
        raw = request.body if media_type(content_type) == FORM_CONTENT_TYPE else b""
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
        error = _form_value(param, text, source, binding, values)
        if error is not None:
            return attrs.evolve(call, error=error)
    return attrs.evolve(call, values=values)


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
        values[param.attr] = convert(param.type, text)
    except _xsd.LexicalError:
        clr = CLR_NAMES.get(param.type.name, param.type.name)
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


def _validation_excerpt(name: str, value: str, index: int) -> str:
    """ASP.NET's excerpt of a refused value: up to 10 characters before, 20 after."""
    start = max(index - 10, 0)
    end = index + 20
    prefix = "..." if start > 0 else ""
    if end >= len(value):
        return f'{name}="{prefix}{value[start:]}"'
    return f'{name}="{prefix}{value[start:end]}..."'
