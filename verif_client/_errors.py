"""Every exception the library raises.

Two families, as in h11: errors about what *we* were about to send
(``RequestValidationError``) and errors about what the *service or the network*
did (``ResponseError`` and ``TransportError``). Messages never contain
credentials: nothing here is ever built from a request body.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "DecodeError",
    "DeliveryUnknownError",
    "HTTPStatusError",
    "ProxyError",
    "RequestValidationError",
    "ResponseError",
    "ResponseTooLargeError",
    "SoapFault",
    "TransportError",
    "VerifClientError",
]

_EXCERPT = 120


def excerpt(value: object, limit: int = _EXCERPT) -> str:
    """A short, printable rendering of a value for an error message."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    return repr(text) if isinstance(value, str) else text


class VerifClientError(Exception):
    """Base class of every error raised by verif_client."""

    operation: str | None = None

    def __init__(self, message: str, *, operation: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.operation = operation

    def __str__(self) -> str:
        if self.operation:
            return f"{self.operation}: {self.message}"
        return self.message


class RequestValidationError(VerifClientError, ValueError):
    """A parameter we were asked to send is invalid; nothing was sent.

    ``field`` is the wire name of the parameter (``PhoneNumber``), ``problem``
    says what is wrong, and ``value`` keeps what the caller gave, untouched.
    """

    def __init__(
        self,
        field: str,
        problem: str,
        *,
        value: object = None,
        show_value: bool = True,
        operation: str | None = None,
    ) -> None:
        shown = f" (got {excerpt(value)})" if show_value and value is not None else ""
        super().__init__(f"{field}: {problem}{shown}", operation=operation)
        self.field = field
        self.problem = problem
        self.value = value if show_value else None


class TransportError(VerifClientError):
    """The request could not be completed at the network level."""


class DeliveryUnknownError(TransportError):
    """A non-repeatable request may or may not have reached the service.

    Raised instead of retrying when, for example, the connection dropped after
    a SendRequestViaSms was written: sending it again could text a customer
    twice. ``phone_number`` (when known) tells which request is in doubt.
    """

    def __init__(
        self, message: str, *, operation: str | None = None, phone_number: str | None = None
    ) -> None:
        super().__init__(message, operation=operation)
        self.phone_number = phone_number


class ProxyError(TransportError):
    """The proxy did not open the way to the service (it refused, with 407 for
    credentials, or answered garbage, or could not be reached): the request
    never reached the service.

    ``proxy`` is the proxy as ``http://host:port``, never with its
    credentials; ``status_code`` is the proxy's answer, when it gave one.
    """

    def __init__(
        self,
        message: str,
        *,
        proxy: str,
        status_code: int | None = None,
        operation: str | None = None,
    ) -> None:
        super().__init__(message, operation=operation)
        self.proxy = proxy
        self.status_code = status_code


class ResponseError(VerifClientError):
    """The service answered, but not with a usable result."""

    status_code: int | None = None


class AuthenticationError(ResponseError):
    """The service refused our credentials (either of its two known shapes)."""

    def __init__(self, message: str, *, status_code: int, operation: str | None = None) -> None:
        super().__init__(message, operation=operation)
        self.status_code = status_code


class SoapFault(ResponseError):
    """A SOAP 1.1 or 1.2 Fault.

    ``code`` is the local part of the fault code (``Client``/``Server`` in SOAP
    1.1, ``Sender``/``Receiver`` in 1.2), ``subcode`` the 1.2 subcode if any,
    ``reason`` the human text and ``detail`` the text content of the detail.
    """

    def __init__(
        self,
        *,
        code: str,
        reason: str,
        subcode: str | None = None,
        detail: str | None = None,
        soap_version: str,
        status_code: int,
        operation: str | None = None,
    ) -> None:
        sub = f"/{subcode}" if subcode else ""
        super().__init__(f"SOAP {soap_version} fault {code}{sub}: {reason}", operation=operation)
        self.code = code
        self.subcode = subcode
        self.reason = reason
        self.detail = detail
        self.soap_version = soap_version
        self.status_code = status_code

    @property
    def is_client_fault(self) -> bool:
        """True when the service blames the request (``Client``/``Sender``)."""
        return self.code in ("Client", "Sender")


class HTTPStatusError(ResponseError):
    """A non-success HTTP status without a SOAP fault.

    ``server_message`` is the first line the server sent, as sent (for ASMX
    that is e.g. ``System.InvalidOperationException: Missing parameter: RequestId.``).
    ``retry_after`` is the wait in seconds a 429's or 503's ``Retry-After``
    asked for (None without one).
    """

    retry_after: float | None = None

    def __init__(
        self, status_code: int, server_message: str, *, operation: str | None = None
    ) -> None:
        shown = f": {server_message}" if server_message else ""
        super().__init__(f"HTTP {status_code}{shown}", operation=operation)
        self.status_code = status_code
        self.server_message = server_message

    def beyond_deadline(self, deadline: float) -> None:
        """Say that the wait asked for did not fit in the call's retry deadline."""
        self.message += (
            f"; the service asked to wait {self.retry_after:g} s (Retry-After), "
            f"past the call's retry deadline of {deadline:g} s"
        )
        self.args = (self.message,)


class DecodeError(ResponseError):
    """The response could not be read as the expected result.

    ``element`` names where in the answer the problem is (``None`` when the
    document as a whole is unreadable).
    """

    def __init__(
        self,
        message: str,
        *,
        element: str | None = None,
        status_code: int | None = None,
        operation: str | None = None,
    ) -> None:
        super().__init__(f"{element}: {message}" if element else message, operation=operation)
        self.element = element
        self.status_code = status_code


class ResponseTooLargeError(ResponseError):
    """The response body exceeded ``max_response_bytes``; it was not read further."""

    def __init__(self, limit: int, *, operation: str | None = None) -> None:
        super().__init__(f"response body exceeds the {limit}-byte limit", operation=operation)
        self.limit = limit
