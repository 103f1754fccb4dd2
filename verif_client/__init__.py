"""Async client for the GIACT VerificationServices v5 SecureLink / mobile consent operations."""

from ._bindings import codec_for
from ._codec import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_NAMESPACE,
    ENDPOINT_PATH,
    Binding,
    Codec,
    Credentials,
    HTTPRequest,
)
from ._errors import (
    AuthenticationError,
    DecodeError,
    DeliveryUnknownError,
    HTTPStatusError,
    RequestValidationError,
    ResponseError,
    ResponseTooLargeError,
    SoapFault,
    TransportError,
    VerifClientError,
)
from ._operations import OPERATIONS, Operation, get_operation
from ._results import Location, LocationResult, RequestResult, VerificationResult

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_NAMESPACE",
    "ENDPOINT_PATH",
    "OPERATIONS",
    "AuthenticationError",
    "Binding",
    "Codec",
    "Credentials",
    "DecodeError",
    "DeliveryUnknownError",
    "HTTPRequest",
    "HTTPStatusError",
    "Location",
    "LocationResult",
    "Operation",
    "RequestResult",
    "RequestValidationError",
    "ResponseError",
    "ResponseTooLargeError",
    "SoapFault",
    "TransportError",
    "VerifClientError",
    "VerificationResult",
    "codec_for",
    "get_operation",
]
