"""Async client for the GIACT VerificationServices v5 SecureLink / mobile consent operations."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._bindings import codec_for
from ._client import VerificationClient
from ._codec import DEFAULT_MAX_RESPONSE_BYTES, Codec, Credentials, HTTPRequest
from ._errors import (
    AuthenticationError,
    DecodeError,
    DeliveryUnknownError,
    HTTPStatusError,
    ProxyError,
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
from ._pollpolicy import PollPolicy, PollStatus
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
from ._transport import SendError, Transport

if TYPE_CHECKING:
    from ._hooks import (
        Hooks,
        LimitWaited,
        PollAdded,
        PollPolled,
        PollSettled,
        RateChanged,
        RequestEnded,
        RequestStarted,
        RetryScheduled,
    )
    from ._otel import OpenTelemetryHooks
    from ._polling import LocationOutcome, PollStream, VerificationOutcome
    from ._sync import SyncVerificationClient

# Public names whose modules a first call does not need: imported on first
# access (docs/performance.md: start-up), then kept in this module's namespace.
_LAZY = {
    "Hooks": "._hooks",
    "LimitWaited": "._hooks",
    "PollAdded": "._hooks",
    "PollPolled": "._hooks",
    "PollSettled": "._hooks",
    "RequestEnded": "._hooks",
    "RequestStarted": "._hooks",
    "RetryScheduled": "._hooks",
    "RateChanged": "._hooks",
    "OpenTelemetryHooks": "._otel",
    "LocationOutcome": "._polling",
    "PollStream": "._polling",
    "VerificationOutcome": "._polling",
    "SyncVerificationClient": "._sync",
}

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
    "ProxyError",
    "RateChanged",
    "RateLimiter",
    "RequestEnded",
    "RequestResult",
    "RequestStarted",
    "RequestValidationError",
    "ResponseError",
    "ResponseTooLargeError",
    "RetryPolicy",
    "RetryScheduled",
    "SendError",
    "SoapFault",
    "SyncVerificationClient",
    "Transport",
    "TransportError",
    "VerifClientError",
    "VerificationClient",
    "VerificationOutcome",
    "VerificationResult",
    "__version__",
    "codec_for",
    "get_operation",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    loaded = import_module(module, __name__)
    names = [other for other, home in _LAZY.items() if home == module]
    show_as_public(__name__, vars(loaded), names)
    globals().update({other: getattr(loaded, other) for other in names})
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


show_as_public(__name__, globals(), [name for name in __all__ if name not in _LAZY])
