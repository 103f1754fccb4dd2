"""What the simulated service remembers, and the six operations on it.

The methods named like the operation table's ``Operation.method`` are the
operations themselves; they receive already-converted parameters (``None`` for
a SOAP parameter that was left out, as .NET's XmlSerializer leaves it null)
and return the typed result the wire writer serialises.

Choices where the service's behaviour is not public (documented in docs/simulator.md):
an unknown request id answers ErrorMessage ``"Invalid SecureLink RequestID"``;
every number has consent until it is revoked (configurable); only the
configured bad-check ids exist.
"""

from __future__ import annotations

import threading
import time
from typing import Final, Literal

import attrs

from .. import _xsd
from .._results import (
    Location,
    LocationResult,
    RequestResult,
    VerificationResult,
)
from .._service import LOCATION_NOT_AVAILABLE, MAX_QUESTION_UNITS, PHONE_NUMBER
from ._config import Script, SimulatorConfig

VerificationState = Literal["pending", "verified", "declined"]
LocationState = Literal["pending", "shared", "denied"]

UNKNOWN_REQUEST: Final = "Invalid SecureLink RequestID"
INVALID_PHONE: Final = "Invalid PhoneNumber: it must be 7 to 15 digits."
MISSING_QUESTION: Final = "ConfirmationQuestion is required."
LONG_QUESTION: Final = "ConfirmationQuestion must be 200 characters or fewer."


@attrs.define(slots=True)
class SecureLinkRequest:
    """One SMS the simulator "sent", and where its owner's answers stand."""

    request_id: int
    phone_number: str
    question: str
    sent_at: float
    script: Script
    verification: VerificationState = "pending"
    location_state: LocationState = "pending"
    location: Location | None = None
    verification_polls: int = 0
    location_polls: int = 0
    sent_at_wall: float = attrs.field(factory=time.time)
    """When the SMS left by the wall clock (``sent_at`` follows the configured clock)."""


class ServiceState:
    """The service's data. Safe to drive from another thread than the server's."""

    def __init__(self, config: SimulatorConfig) -> None:
        self._config = config
        self.lock = threading.RLock()
        self._next_id = config.first_request_id
        self.requests: dict[int, SecureLinkRequest] = {}
        self.scripts_by_phone: dict[str, Script] = {}
        self.consent: dict[str, bool] = {}
        self.bad_checks: dict[int, str] = dict(config.bad_checks)
        self.consent_text = config.consent_text

    # -- the operations, named after Operation.method -----------------------

    def send_confirmation_sms(
        self, phone_number: str | None, question: str | None
    ) -> RequestResult:
        if phone_number is None or not PHONE_NUMBER.fullmatch(phone_number):
            return RequestResult(0, INVALID_PHONE)
        if not question or not question.strip():
            return RequestResult(0, MISSING_QUESTION)
        if _xsd.utf16_length(question) > MAX_QUESTION_UNITS:
            return RequestResult(0, LONG_QUESTION)
        with self.lock:
            request_id = self._next_id
            self._next_id += 1
            script = self.scripts_by_phone.get(phone_number, self._config.default_script)
            self.requests[request_id] = SecureLinkRequest(
                request_id, phone_number, question, self._config.clock(), script
            )
        return RequestResult(request_id)

    def has_been_verified(self, request_id: int) -> VerificationResult:
        with self.lock:
            # A plain .NET bool cannot be nil: it says false where a bool? says nil.
            not_yet = False if self._config.verified_dialect == "bool" else None
            request = self.requests.get(request_id)
            if request is None:
                return VerificationResult(not_yet, UNKNOWN_REQUEST)
            request.verification_polls += 1
            polls, script = request.verification_polls, request.script
            if request.verification == "pending" and self._due(
                request, script.answer, polls, script.pending_polls, script.pending_seconds
            ):
                request.verification = "verified" if script.answer == "verified" else "declined"
            verified = {"pending": not_yet, "verified": True, "declined": False}
            return VerificationResult(verified[request.verification])

    def get_mobile_location(self, request_id: int) -> LocationResult:
        with self.lock:
            request = self.requests.get(request_id)
            if request is None:
                return LocationResult(None, UNKNOWN_REQUEST)
            request.location_polls += 1
            polls, script = request.location_polls, request.script
            wait = (script.location_pending_polls, script.location_pending_seconds)
            if request.location_state == "pending" and self._due(
                request, script.location, polls, *wait
            ):
                request.location_state = "shared" if script.location == "shared" else "denied"
                request.location = script.shared_location if script.location == "shared" else None
            if request.location_state == "shared":
                return LocationResult(request.location)
            return LocationResult(None, LOCATION_NOT_AVAILABLE)

    def update_bad_check_reject_reason(self, bad_check_id: int, reject_reason: str | None) -> bool:
        with self.lock:
            if bad_check_id not in self.bad_checks:
                return False
            self.bad_checks[bad_check_id] = reject_reason or ""
            return True

    def revoke_mobile_consent(self, mobile_number: str | None) -> bool:
        with self.lock:
            if mobile_number is None or not self.has_consent(mobile_number):
                return False
            self.consent[mobile_number] = False
            return True

    def get_mobile_consent_text(self) -> str:
        return self.consent_text

    # -- helpers ------------------------------------------------------------

    def has_consent(self, number: str) -> bool:
        if not PHONE_NUMBER.fullmatch(number):
            return False
        return self.consent.get(number, self._config.consent_by_default)

    def get(self, request_id: int) -> SecureLinkRequest:
        request = self.requests.get(request_id)
        if request is None:
            raise KeyError(f"no SecureLink request with id {request_id}")
        return request

    def _due(
        self,
        request: SecureLinkRequest,
        answer: str,
        polls: int,
        pending_polls: int,
        pending_seconds: float | None,
    ) -> bool:
        """Whether a pending answer its script gives at all is given at this poll."""
        if answer == "never":
            return False
        if pending_seconds is not None:
            return self._config.clock() - request.sent_at >= pending_seconds
        return polls > pending_polls
