"""Async client for the GIACT VerificationServices v5 SecureLink / mobile consent operations."""

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
from ._hooks import (
    Hooks,
    LimitWaited,
    PollAdded,
    PollPolled,
    PollSettled,
    RequestEnded,
    RequestStarted,
    RetryScheduled,
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
from ._otel import OpenTelemetryHooks
from ._polling import LocationOutcome, PollPolicy, PollStatus, PollStream, VerificationOutcome
from ._public import show_as_public
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
    "Hooks",
    "LimitWaited",
    "Limiter",
    "Location",
    "LocationOutcome",
    "LocationResult",
    "OpenTelemetryHooks",
    "Operation",
    "PollAdded",
    "PollPolicy",
    "PollPolled",
    "PollSettled",
    "PollStatus",
    "PollStream",
    "RateLimiter",
    "RequestEnded",
    "RequestResult",
    "RequestStarted",
    "RequestValidationError",
    "ResponseError",
    "ResponseTooLargeError",
    "RetryPolicy",
    "RetryScheduled",
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


show_as_public(__name__, globals(), __all__)
