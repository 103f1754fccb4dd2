"""Async client for the GIACT VerificationServices v5 SecureLink / mobile consent operations."""

from ._bindings import codec_for
from ._client import PRODUCTION_BASE_URL, SANDBOX_BASE_URL, VerificationClient
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
from ._operations import OPERATIONS, Operation, get_operation
from ._otel import OpenTelemetryHooks
from ._polling import LocationOutcome, PollPolicy, PollStatus, PollStream, VerificationOutcome
from ._ratelimit import Limiter, RateLimiter
from ._results import Location, LocationResult, RequestResult, VerificationResult
from ._retry import NO_RETRY, RetryPolicy
from ._sync import SyncVerificationClient

__all__ = [
    "OpenTelemetryHooks",
    "RetryScheduled",
    "RequestStarted",
    "RequestEnded",
    "PollSettled",
    "PollPolled",
    "PollAdded",
    "LimitWaited",
    "Hooks",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_NAMESPACE",
    "ENDPOINT_PATH",
    "NO_RETRY",
    "OPERATIONS",
    "PRODUCTION_BASE_URL",
    "SANDBOX_BASE_URL",
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
    "codec_for",
    "get_operation",
]
