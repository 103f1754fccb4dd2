"""Reading a request the way ASMX does: routing, binding, parameters, credentials.

``AsmxEndpoint.route`` turns a raw request into a :class:`Call` (the operation
and its converted parameters) or into the error answer ASMX would give, in the
order ASMX checks things: the refusals of ASP.NET first (here), then the HTTP
GET/POST reading (``_asmx_form``) or the SOAP one (``_asmx_soap``).
``AsmxEndpoint.execute`` runs a parsed call against the service state and
writes the answer. Everything is driven by the operation table; nothing here
knows a particular operation.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final
from urllib.parse import parse_qsl

from .._operations import OPERATIONS, Operation
from . import _responses as r
from ._asmx_call import (
    MAX_QUERY_LENGTH,
    MAX_REQUEST_BYTES,
    Call,
    Request,
    header_map,
    media_type,
)
from ._asmx_form import form_call
from ._asmx_soap import SOAP_MEDIA, UNPROCESSABLE, SoapReader, fault
from ._state import ServiceState
from ._wire import SOAP_ENVELOPES, bare_response, soap_response
from ._wsdl import SERVICE_NAME, wsdl_document

# Read from here by the simulator and the tests: the reading is in _asmx_call.
__all__ = [
    "MAX_QUERY_LENGTH",
    "MAX_REQUEST_BYTES",
    "THROWN_MESSAGE",
    "AsmxEndpoint",
    "Call",
    "Request",
    "header_map",
]

THROWN_MESSAGE: Final = "The simulated operation failed."


class AsmxEndpoint:
    """The ASMX endpoint of the simulated service: a request routed, read, and run."""

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
        self.namespace = namespace
        self.endpoint_path = endpoint_path.rstrip("/")
        self._by_name = {op.name: op for op in OPERATIONS}
        self._by_lower_name = {op.name.lower(): op for op in OPERATIONS}
        self.throws = frozenset(throws)
        self._soap = SoapReader(
            namespace=namespace,
            credentials=credentials,
            accept_any_credentials=accept_any_credentials,
            credential_failure=credential_failure,
        )

    # The SOAP reader checks the credentials: these say what it was given.

    @property
    def credentials(self) -> tuple[str, str] | None:
        """The (username, password) a SOAP call must carry (None: any non-empty pair)."""
        return self._soap.credentials

    @property
    def accept_any_credentials(self) -> bool:
        """Every SOAP call goes through, whatever its credentials."""
        return self._soap.accept_any_credentials

    @property
    def credential_failure(self) -> str:
        """How wrong credentials are answered: "message" or "http-401"."""
        return self._soap.credential_failure

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
                return self._soap.call(request)
        else:
            # A POST to ".asmx/" names an empty method: not SOAP, and no method.
            name = request.path[len(self.endpoint_path) + 1 :]
            binding = "http-get" if request.method == "GET" else "http-post"
            op = self._by_name.get(name)
            if op is not None and request.method in ("GET", "POST"):
                return form_call(request, op)
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
        media = media_type(request.headers.get("content-type"))
        soap_binding = SOAP_MEDIA.get(media) if soap_path and request.method == "POST" else None
        binding = soap_binding or ("http-get" if request.method == "GET" else "http-post")
        if len(request.query) > MAX_QUERY_LENGTH:
            return Call(binding, error=r.query_too_long())
        if request.too_large:
            if soap_binding is not None:
                reason = f"{UNPROCESSABLE}Maximum request length exceeded."
                return Call(soap_binding, error=fault(soap_binding, "Server", reason))
            return Call(
                binding,
                error=r.asmx_error(
                    "System.Web.HttpException (0x80004005): Maximum request length exceeded."
                ),
            )
        if request.method == "POST" and "content-type" in request.repeated:
            return Call(binding, error=r.Response(415, None, b""))
        return None

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
            reason = f"{UNPROCESSABLE}{THROWN_MESSAGE}"
            return fault(binding, "Server", reason)
        return r.asmx_error(
            f"System.Exception: {THROWN_MESSAGE}",
            f"{SERVICE_NAME}.{op.name}()",
            "System.Web.Services.Protocols.LogicalMethodInfo.Invoke(Object target, "
            "Object[] values)",
            "System.Web.Services.Protocols.WebServiceHandler.Invoke()",
            "System.Web.Services.Protocols.WebServiceHandler.CoreProcessRequest()",
        )
