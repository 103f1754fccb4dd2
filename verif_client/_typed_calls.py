"""The six operations as typed methods of :class:`VerificationClient`.

A seventh operation's typed method goes here, beside its entry in the
operations table (``_operations.py``): each one builds its wire parameters
from the table and calls ``call_with``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from ._operations import (
    GET_MOBILE_CONSENT_TEXT,
    GET_MOBILE_LOCATION,
    HAS_BEEN_VERIFIED,
    REVOKE_MOBILE_CONSENT,
    SEND_CONFIRMATION_SMS,
    UPDATE_BAD_CHECK_REJECT_REASON,
    Operation,
)
from ._results import LocationResult, RequestResult, VerificationResult
from ._service import Binding

if TYPE_CHECKING:
    from ._pollpolicy import VerifiedDialect
    from ._retry import RetryPolicy

R = TypeVar("R")


class _TypedCalls:
    """Mixed into VerificationClient: its typed methods, one per operation."""

    if TYPE_CHECKING:
        _verified_dialect: VerifiedDialect

        async def call_with(
            self,
            operation: Operation[R],
            params: Mapping[str, object],
            *,
            binding: Binding | str | None = None,
            retry: RetryPolicy | None = None,
            before_send: Callable[[], Awaitable[None]] | None = None,
        ) -> R: ...

    async def send_confirmation_sms(
        self, phone_number: str, question: str, *, binding: Binding | str | None = None
    ) -> RequestResult:
        """Text ``question`` (a yes/no question) to ``phone_number``
        (SecureLink_Confirmation_SendRequestViaSms).

        Never retried once the request may have left: a second SMS is a real
        harm. Poll the answer with :meth:`has_been_verified` or
        :meth:`wait_until_verified`.

        Args:
            phone_number: 7 to 15 ASCII digits.
            question: The question, 1 to 200 UTF-16 code units.
            binding: This call's binding, instead of the client's.

        Returns:
            The ``request_id`` to poll (``error_message`` when the service
            refused the request).

        Raises:
            RequestValidationError: A parameter breaks a rule; nothing was sent.
            TransportError: The network failed, after the retries allowed.
            ResponseError: The service answered, with no result (its subclasses
                are on the Results and errors page).
            DeliveryUnknownError: The request may have reached the service: it
                is not sent again; the error names the number.
        """
        params = SEND_CONFIRMATION_SMS.wire_params(phone_number, question)
        return await self.call_with(SEND_CONFIRMATION_SMS, params, binding=binding)

    async def has_been_verified(
        self, request_id: int, *, binding: Binding | str | None = None
    ) -> VerificationResult:
        """Whether the owner confirmed (SecureLink_SecurityCode_HasBeenVerified).

        Args:
            request_id: The id :meth:`send_confirmation_sms` returned.
            binding: This call's binding, instead of the client's.

        Returns:
            ``verified``: ``True``, ``False``, or ``None`` while nobody answered
            (a service of the plain-``bool`` shape says ``False`` until then:
            see ``PollPolicy.false_means``).

        Raises:
            RequestValidationError: A parameter breaks a rule; nothing was sent.
            TransportError: The network failed, after the retries allowed.
            ResponseError: The service answered, with no result (its subclasses
                are on the Results and errors page).
        """
        params = HAS_BEEN_VERIFIED.wire_params(request_id)
        result = await self.call_with(HAS_BEEN_VERIFIED, params, binding=binding)
        self._verified_dialect.learn(result)
        return result

    async def get_mobile_location(
        self, request_id: int, *, binding: Binding | str | None = None
    ) -> LocationResult:
        """The location the owner shared (SecureLink_MobileLocation_GetResult).

        Args:
            request_id: The id :meth:`send_confirmation_sms` returned.
            binding: This call's binding, instead of the client's.

        Returns:
            ``location`` (a ``Location``), or ``None`` until the owner shares it
            (``error_message`` says why).

        Raises:
            RequestValidationError: A parameter breaks a rule; nothing was sent.
            TransportError: The network failed, after the retries allowed.
            ResponseError: The service answered, with no result (its subclasses
                are on the Results and errors page).
        """
        params = GET_MOBILE_LOCATION.wire_params(request_id)
        return await self.call_with(GET_MOBILE_LOCATION, params, binding=binding)

    async def revoke_mobile_consent(
        self, mobile_number: str, *, binding: Binding | str | None = None
    ) -> bool:
        """Revoke the consent recorded for a mobile number (RevokeMobileConsent).

        Never retried once the request may have left.

        Args:
            mobile_number: The number, 7 to 15 ASCII digits.
            binding: This call's binding, instead of the client's.

        Returns:
            Whether consent existed and was revoked (``False``: there was none).

        Raises:
            DeliveryUnknownError: The revocation may have reached the service:
                it is not sent again.
            TransportError: Any other network failure, after the retries.
            RequestValidationError: Not 7 to 15 ASCII digits; nothing was sent.
            ResponseError: The service answered, with no result.
        """
        params = REVOKE_MOBILE_CONSENT.wire_params(mobile_number)
        return await self.call_with(REVOKE_MOBILE_CONSENT, params, binding=binding)

    async def get_mobile_consent_text(self, *, binding: Binding | str | None = None) -> str:
        """The consent text a number's owner must agree to (GetMobileConsentText).

        Args:
            binding: This call's binding, instead of the client's.

        Returns:
            The text; a null text reads as ``""``.

        Raises:
            RequestValidationError: A parameter breaks a rule; nothing was sent.
            TransportError: The network failed, after the retries allowed.
            ResponseError: The service answered, with no result (its subclasses
                are on the Results and errors page).
        """
        return await self.call_with(GET_MOBILE_CONSENT_TEXT, {}, binding=binding)

    async def update_bad_check_reject_reason(
        self, bad_check_id: int, reject_reason: str, *, binding: Binding | str | None = None
    ) -> bool:
        """Set the reject reason of a bad-check item
        (UpdatePrivateBadCheckRejectReason).

        Never retried once the request may have left.

        Args:
            bad_check_id: The item's id (a 64-bit integer).
            reject_reason: The CheckRejectReason to record, e.g. ``"NSF"``.
            binding: This call's binding, instead of the client's.

        Returns:
            Whether the service updated the item.

        Raises:
            RequestValidationError: A parameter breaks a rule; nothing was sent.
            TransportError: The network failed, after the retries allowed.
            ResponseError: The service answered, with no result (its subclasses
                are on the Results and errors page).
            DeliveryUnknownError: The request may have reached the service; it
                is not sent again.
        """
        params = UPDATE_BAD_CHECK_REJECT_REASON.wire_params(bad_check_id, reject_reason)
        return await self.call_with(UPDATE_BAD_CHECK_REJECT_REASON, params, binding=binding)
