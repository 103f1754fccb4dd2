"""What every benchmark sends and receives, derived from the operation table.

Sample inputs and the service's answers come from the table and from the
simulator's own wire writer (which shares no formatting code with the client),
so every operation x binding is covered without a block per operation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Final
from urllib.parse import parse_qs, urlsplit

import httpx

from verif_client import DEFAULT_NAMESPACE, ENDPOINT_PATH, OPERATIONS, Binding, Operation, _xsd
from verif_client._results import VerificationResult
from verif_client.simulator import Script, Simulator, SimulatorConfig
from verif_client.simulator._state import ServiceState
from verif_client.simulator._wire import bare_response, soap_response
from verif_client.simulator._wsdl import wsdl_document

USERNAME: Final = "bench-user"
PASSWORD: Final = "s3cret&<pw>"
PHONE: Final = "5551234567"
QUESTION: Final = "Did you ask ACME & Co. to pay $25 (< $30) today?"
BASE_URL: Final = "http://sim.test"
VERIFIED_OP: Final = next(op for op in OPERATIONS if op.name.endswith("HasBeenVerified"))
POLLS_TO_VERIFY: Final = 5  # verified on the 5th poll: 4 pending answers first

# Values of the right type and inside the service's rules; strings carry
# characters that must be escaped so no codec gets a free ride.
_SAMPLE_BY_TYPE: Final[dict[_xsd.XsdType, object]] = {
    _xsd.LONG: 2**32 + 7,
    _xsd.INT: 12,
    _xsd.STRING: "Account closed & < 30 days",
}
_SAMPLE_BY_PARAM: Final[dict[str, object]] = {
    "PhoneNumber": PHONE,
    "MobileNumber": PHONE,
    "ConfirmationQuestion": QUESTION,
}


def sample_params(op: Operation) -> dict[str, object]:
    return {p.name: _SAMPLE_BY_PARAM.get(p.name, _SAMPLE_BY_TYPE[p.type]) for p in op.params}


def sample_answers() -> dict[str, object]:
    """A settled, non-error answer of each operation, from the simulator's state."""
    state = ServiceState(SimulatorConfig(script=Script(pending_polls=0, location_pending_polls=0)))
    request_id = state.send_confirmation_sms(PHONE, QUESTION).request_id
    answers: dict[str, object] = {}
    for op in OPERATIONS:
        params = sample_params(op)
        if "RequestId" in params:
            params["RequestId"] = request_id
        if "BadCheckId" in params:
            params["BadCheckId"] = next(iter(state.bad_checks))
        answers[op.name] = getattr(state, op.method)(*params.values())
    return answers


def response_body(op: Operation, binding: Binding, value: object) -> bytes:
    """The body the service answers with, as ASMX writes it for this binding."""
    if binding.is_soap:
        return soap_response(op, value, DEFAULT_NAMESPACE, binding.value)
    return bare_response(op, value, DEFAULT_NAMESPACE)


def content_type(binding: Binding) -> str:
    if binding is Binding.SOAP12:
        return "application/soap+xml; charset=utf-8"
    return "text/xml; charset=utf-8"


def write_wsdl(directory: Path, location: str = BASE_URL + ENDPOINT_PATH) -> Path:
    """The simulator's ?WSDL document as a file, for zeep to load without a server."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "InquiriesWS.wsdl"
    path.write_bytes(wsdl_document(DEFAULT_NAMESPACE, location))
    return path


# What a hand-written client sends: a HasBeenVerified envelope as a %d template.
HAND_TEMPLATE: Final = (
    '<?xml version="1.0" encoding="utf-8"?><soap:Envelope '
    'xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Header>'
    f'<AuthenticationHeader xmlns="{DEFAULT_NAMESPACE}"><ApiUsername>bench-user</ApiUsername>'
    "<ApiPassword>s3cret&amp;&lt;pw&gt;</ApiPassword></AuthenticationHeader></soap:Header>"
    f'<soap:Body><SecureLink_SecurityCode_HasBeenVerified xmlns="{DEFAULT_NAMESPACE}">'
    "<RequestId>%d</RequestId></SecureLink_SecurityCode_HasBeenVerified></soap:Body>"
    "</soap:Envelope>"
)
HAND_HEADERS: Final = {
    "Content-Type": "text/xml; charset=utf-8",
    "SOAPAction": f'"{DEFAULT_NAMESPACE}/SecureLink_SecurityCode_HasBeenVerified"',
}


# -- a service that verifies every id on its 5th poll, without a simulator ----

_SOAP_ID: Final = re.compile(rb"<(?:\w+:)?RequestId>(\d+)<")


def _request_binding(request: httpx.Request) -> Binding:
    if request.method == "GET":
        return Binding.HTTP_GET
    media = request.headers.get("content-type", "")
    if media.startswith("application/x-www-form-urlencoded"):
        return Binding.HTTP_POST
    return Binding.SOAP12 if media.startswith("application/soap+xml") else Binding.SOAP11


def _request_id(request: httpx.Request, binding: Binding) -> int:
    if binding.is_soap:
        found = _SOAP_ID.search(request.content)
        assert found is not None, request.content
        return int(found.group(1))
    text = urlsplit(str(request.url)).query if binding is Binding.HTTP_GET else request.content
    values = parse_qs(text if isinstance(text, str) else text.decode("ascii"))
    return int(values["RequestId"][0])


def verify_on_nth_poll(polls: int = POLLS_TO_VERIFY) -> Callable[[httpx.Request], httpx.Response]:
    """An ``httpx.MockTransport`` handler for HasBeenVerified in any binding:
    ``Verified`` nil for the first ``polls - 1`` polls of an id, true after."""
    answers = {
        (binding, verified): response_body(VERIFIED_OP, binding, VerificationResult(verified))
        for binding in Binding
        for verified in (None, True)
    }
    headers = {b: [("content-type", content_type(b))] for b in Binding}
    seen: dict[int, int] = {}

    def handle(request: httpx.Request) -> httpx.Response:
        binding = _request_binding(request)
        request_id = _request_id(request, binding)
        count = seen.get(request_id, 0) + 1
        seen[request_id] = count
        body = answers[binding, True if count >= polls else None]
        return httpx.Response(200, headers=headers[binding], content=body)

    return handle


def scripted_simulator(pending_polls: int = POLLS_TO_VERIFY - 1) -> Simulator:
    return Simulator(config=SimulatorConfig(script=Script(pending_polls=pending_polls)))


def create_requests(simulator: Simulator, count: int) -> list[int]:
    """SMS requests made directly in the simulator's state: sending 10,000 SMS
    through HTTP first would cost more than the polling being measured."""
    state = simulator._state
    return [state.send_confirmation_sms(PHONE, QUESTION).request_id for _ in range(count)]
