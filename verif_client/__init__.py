"""Async client for the GIACT VerificationServices v5 SecureLink / mobile consent operations."""

from types import FunctionType

from ._bindings import codec_for
from ._client import VerificationClient
from ._codec import DEFAULT_MAX_RESPONSE_BYTES, Codec, Credentials, HTTPRequest
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
from ._operations import (
    GET_MOBILE_CONSENT_TEXT,
    GET_MOBILE_LOCATION,
    HAS_BEEN_VERIFIED,
    OPERATIONS,
    REVOKE_MOBILE_CONSENT,
    SEND_CONFIRMATION_SMS,
    UPDATE_BAD_CHECK_REJECT_REASON,
    Operation,
    get_operation,
)
from ._polling import LocationOutcome, PollPolicy, PollStatus, PollStream, VerificationOutcome
from ._ratelimit import Limiter, RateLimiter
from ._results import Location, LocationResult, RequestResult, VerificationResult
from ._retry import NO_RETRY, RetryPolicy
from ._service import (
    DEFAULT_NAMESPACE,
    ENDPOINT_PATH,
    PRODUCTION_BASE_URL,
    SANDBOX_BASE_URL,
    Binding,
)
from ._sync import SyncVerificationClient

__version__ = "0.1.0"  # the one place it is written: pyproject.toml reads it from here

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_NAMESPACE",
    "ENDPOINT_PATH",
    "GET_MOBILE_CONSENT_TEXT",
    "GET_MOBILE_LOCATION",
    "HAS_BEEN_VERIFIED",
    "NO_RETRY",
    "OPERATIONS",
    "PRODUCTION_BASE_URL",
    "REVOKE_MOBILE_CONSENT",
    "SANDBOX_BASE_URL",
    "SEND_CONFIRMATION_SMS",
    "UPDATE_BAD_CHECK_REJECT_REASON",
    "AuthenticationError",
    "Binding",
    "Codec",
    "Credentials",
    "DecodeError",
    "DeliveryUnknownError",
    "HTTPRequest",
    "HTTPStatusError",
    "Location",
    "LocationOutcome",
    "Limiter",
    "LocationResult",
    "Operation",
    "PollPolicy",
    "PollStatus",
    "PollStream",
    "RateLimiter",
    "RequestResult",
    "RequestValidationError",
    "ResponseError",
    "ResponseTooLargeError",
    "RetryPolicy",
    "SoapFault",
    "SyncVerificationClient",
    "TransportError",
    "VerifClientError",
    "VerificationClient",
    "VerificationOutcome",
    "VerificationResult",
    "__version__",
    "codec_for",
    "get_operation",
]


def _show_public_names_here() -> None:
    # Reprs and tracebacks then say verif_client.SoapFault, the name users import,
    # not the private module it happens to be defined in.
    for name in __all__:
        value = globals()[name]
        if isinstance(value, type | FunctionType) and value.__module__.startswith(__name__ + "._"):
            value.__module__ = __name__


_show_public_names_here()
