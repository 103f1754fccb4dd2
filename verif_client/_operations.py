"""The one table of the service's operations.

Everything that differs between operations lives here: wire names, parameter
order and types, service rules on inputs, result shapes, the bare root element
of the HTTP GET/POST answers and whether a call may be repeated safely. Every
codec, the client, the simulator and the CLI are generic over ``OPERATIONS``.

Each operation is also a public constant named after its client method in
capitals (``HAS_BEEN_VERIFIED`` for ``has_been_verified``), typed with its
result: ``Operation[VerificationResult]``, so ``codec.decode(HAS_BEEN_VERIFIED,
...)`` and ``client.call(HAS_BEEN_VERIFIED, ...)`` are typed too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Generic, overload

import attrs

from . import _xsd
from ._compat import TypeVar
from ._errors import RequestValidationError
from ._results import Location, LocationResult, RequestResult, VerificationResult
from ._service import MAX_QUESTION_UNITS, PHONE_NUMBER
from ._xsd import XsdType

R = TypeVar("R", default=Any)
"""The result type of an operation; a bare ``Operation`` is one of any result."""

ServiceRule = Callable[[object], "str | None"]
"""Returns a description of what is wrong with a value, or None when it is fine."""


def _phone_rule(value: object) -> str | None:
    if isinstance(value, str) and not PHONE_NUMBER.fullmatch(value):
        return "must be 7 to 15 ASCII digits"
    return None


def _question_rule(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    units = _xsd.utf16_length(value)
    if units == 0:
        return "is required"
    if units > MAX_QUESTION_UNITS:
        return f"is {units} UTF-16 code units long; the service allows at most {MAX_QUESTION_UNITS}"
    return None


def _request_id_rule(value: object) -> str | None:
    if isinstance(value, int) and value < 0:
        return "must be between 0 and 2**63-1"
    return None


@attrs.frozen
class Param:
    """One input parameter: wire name, Python name, type and service rule;
    ``phone`` marks the mobile number a request acts on (what a
    DeliveryUnknownError names)."""

    name: str
    attr: str
    type: XsdType
    rule: ServiceRule | None = None
    phone: bool = False


@attrs.frozen
class Field:
    """One element of a result record and the attribute it fills."""

    element: str
    attr: str
    type: XsdType[Any] | Record[Any]
    required: bool = False


@attrs.frozen
class Record(Generic[R]):
    """A complex result: the class to build and its fields in wire order."""

    cls: Callable[..., R]
    fields: tuple[Field, ...]
    by_element: Mapping[str, Field] = attrs.field(init=False)

    @by_element.default
    def _index(self) -> Mapping[str, Field]:
        return {field.element: field for field in self.fields}


ResultShape = XsdType | Record


@attrs.frozen
class Operation(Generic[R]):
    """One operation of the service, with everything a codec needs to know;
    ``R`` is the type of its result."""

    name: str
    method: str
    params: tuple[Param, ...]
    result: XsdType[R] | Record[R]
    bare_root: str
    idempotent: bool
    doc: str

    # Derived once (every call reads them): not part of the table, nor of equality.
    response_element: str = attrs.field(init=False, eq=False, repr=False)
    """The SOAP body's answer element: the name + ``Response``."""
    result_element: str = attrs.field(init=False, eq=False, repr=False)
    """The element holding the result: the name + ``Result``."""
    param_names: tuple[str, ...] = attrs.field(init=False, eq=False, repr=False)
    """The parameters' wire names, in the contract's order."""

    @response_element.default
    def _response_element(self) -> str:
        return self.name + "Response"

    @result_element.default
    def _result_element(self) -> str:
        return self.name + "Result"

    @param_names.default
    def _param_names(self) -> tuple[str, ...]:
        return tuple(param.name for param in self.params)

    @property
    def phone_param(self) -> str | None:
        """The wire name of the parameter holding the mobile number acted on, if any."""
        return next((param.name for param in self.params if param.phone), None)

    def wire_params(self, *values: object) -> dict[str, object]:
        """The parameters keyed by wire name, from values given in table order."""
        return {param.name: value for param, value in zip(self.params, values, strict=True)}


LOCATION_RECORD: Final = Record(
    Location,
    (
        Field("Latitude", "latitude", _xsd.DOUBLE),
        Field("Longitude", "longitude", _xsd.DOUBLE),
        Field("AccuracyRadius", "accuracy_radius", _xsd.DOUBLE),
        Field("Altitude", "altitude", _xsd.DOUBLE),
        Field("AltitudeAccuracy", "altitude_accuracy", _xsd.DOUBLE),
        Field("Address", "address", _xsd.STRING),
        Field("ZipPostalCode", "zip_postal_code", _xsd.STRING),
        Field("City", "city", _xsd.STRING),
        Field("StateRegion", "state_region", _xsd.STRING),
        Field("CountyDistrict", "county_district", _xsd.STRING),
        Field("Country", "country", _xsd.STRING),
        Field("Distance", "distance", _xsd.INT),
    ),
)

_ERROR_MESSAGE = Field("ErrorMessage", "error_message", _xsd.STRING)

SEND_CONFIRMATION_SMS: Final[Operation[RequestResult]] = Operation(
    name="SecureLink_Confirmation_SendRequestViaSms",
    method="send_confirmation_sms",
    params=(
        Param("PhoneNumber", "phone_number", _xsd.STRING, _phone_rule, phone=True),
        Param("ConfirmationQuestion", "question", _xsd.STRING, _question_rule),
    ),
    result=Record(
        RequestResult,
        (Field("SecureLinkRequestId", "request_id", _xsd.LONG, required=True), _ERROR_MESSAGE),
    ),
    bare_root="SecureLinkRequestResult",
    idempotent=False,
    doc="Send a yes/no confirmation question by SMS; returns the request id to poll.",
)

HAS_BEEN_VERIFIED: Final[Operation[VerificationResult]] = Operation(
    name="SecureLink_SecurityCode_HasBeenVerified",
    method="has_been_verified",
    params=(Param("RequestId", "request_id", _xsd.LONG, _request_id_rule),),
    result=Record(
        VerificationResult, (Field("Verified", "verified", _xsd.BOOLEAN), _ERROR_MESSAGE)
    ),
    bare_root="SecureLinkCodeVerificationResult",
    idempotent=True,
    doc="Tell whether the owner confirmed a request (None while pending).",
)

GET_MOBILE_LOCATION: Final[Operation[LocationResult]] = Operation(
    name="SecureLink_MobileLocation_GetResult",
    method="get_mobile_location",
    params=(Param("RequestId", "request_id", _xsd.LONG, _request_id_rule),),
    result=Record(
        LocationResult, (Field("LocationResult", "location", LOCATION_RECORD), _ERROR_MESSAGE)
    ),
    bare_root="SecureLinkLocationResult",
    idempotent=True,
    doc="Fetch the location the owner shared for a request (None while pending).",
)

UPDATE_BAD_CHECK_REJECT_REASON: Final[Operation[bool]] = Operation(
    name="UpdatePrivateBadCheckRejectReason",
    method="update_bad_check_reject_reason",
    params=(
        Param("BadCheckId", "bad_check_id", _xsd.LONG),
        Param("CheckRejectReason", "reject_reason", _xsd.STRING),
    ),
    result=_xsd.BOOLEAN,
    bare_root="boolean",
    idempotent=False,
    doc="Set the CheckRejectReason of a bad-check item.",
)

REVOKE_MOBILE_CONSENT: Final[Operation[bool]] = Operation(
    name="RevokeMobileConsent",
    method="revoke_mobile_consent",
    params=(Param("MobileNumber", "mobile_number", _xsd.STRING, phone=True),),
    result=_xsd.BOOLEAN,
    bare_root="boolean",
    idempotent=False,
    doc="Revoke the consent recorded for a mobile number.",
)

GET_MOBILE_CONSENT_TEXT: Final[Operation[str]] = Operation(
    name="GetMobileConsentText",
    method="get_mobile_consent_text",
    params=(),
    result=_xsd.STRING,
    bare_root="string",
    idempotent=True,
    doc="Fetch the consent text a number's owner must agree to.",
)

OPERATIONS: Final[tuple[Operation[Any], ...]] = (
    SEND_CONFIRMATION_SMS,
    HAS_BEEN_VERIFIED,
    GET_MOBILE_LOCATION,
    UPDATE_BAD_CHECK_REJECT_REASON,
    REVOKE_MOBILE_CONSENT,
    GET_MOBILE_CONSENT_TEXT,
)

OPERATIONS_BY_NAME: Final[Mapping[str, Operation[Any]]] = {op.name: op for op in OPERATIONS}


@overload
def get_operation(operation: Operation[R]) -> Operation[R]: ...
@overload
def get_operation(operation: str) -> Operation[Any]: ...
def get_operation(operation: str | Operation[Any]) -> Operation[Any]:
    """Look an operation up by wire name (case-insensitive, as IIS routes)."""
    if isinstance(operation, Operation):
        return operation
    found = OPERATIONS_BY_NAME.get(operation)
    if found is None:
        for candidate in OPERATIONS:
            if candidate.name.lower() == str(operation).lower():
                return candidate
        known = ", ".join(OPERATIONS_BY_NAME)
        raise RequestValidationError(
            "operation", f"unknown operation; expected one of {known}", value=operation
        )
    return found
