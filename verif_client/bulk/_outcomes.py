"""What a row's send and polls came to, as its final state and output fields.

Shared by every way a job runs (the local runner, the Temporal activities).
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from .._errors import (
    AuthenticationError,
    DeliveryUnknownError,
    HTTPStatusError,
    SoapFault,
    TransportError,
    VerifClientError,
)
from .._polling import LocationOutcome, VerificationOutcome
from .._pollpolicy import PollStatus
from ._job import RowState

_VERIFICATION_STATES: Final = {
    PollStatus.VERIFIED: RowState.VERIFIED,
    PollStatus.DECLINED: RowState.DECLINED,
    PollStatus.TIMED_OUT: RowState.NOT_VERIFIED,
    PollStatus.FAILED: RowState.FAILED,
}


def outcome_of_failure(exc: VerifClientError, *, written: bool) -> RowState:
    """The state of a row whose SendRequestViaSms ended in ``exc``.

    ``failed`` claims the customer was not texted, so it is kept for what
    proves it: a refusal the service answered in a form we could read, or a
    request that never left. Anything else once the request may have been
    written (a dropped connection, a timeout, a 5xx, a server fault, a body
    too large or unreadable) may hide a sent SMS: ``unknown``, never resent
    unless asked.
    """
    if not written:
        return RowState.FAILED
    if isinstance(exc, DeliveryUnknownError):
        return RowState.UNKNOWN
    if isinstance(exc, AuthenticationError):
        return RowState.FAILED
    if isinstance(exc, SoapFault):
        return RowState.FAILED if exc.is_client_fault else RowState.UNKNOWN
    if isinstance(exc, HTTPStatusError):
        return RowState.FAILED if (exc.status_code or 500) < 500 else RowState.UNKNOWN
    if isinstance(exc, TransportError):
        return RowState.FAILED  # the client raises this only for what never left
    return RowState.UNKNOWN


def _location_json(outcome: LocationOutcome) -> dict[str, Any]:
    location = outcome.result.location if outcome.result else None
    return {
        "location_status": outcome.status.value,
        "location": attrs.asdict(location) if location else None,
    }


def _verification_json(outcome: VerificationOutcome) -> dict[str, Any]:
    result = outcome.result
    reason = None
    if outcome.error is not None:
        reason = str(outcome.error)
    elif result is not None and result.error_message:
        reason = result.error_message
    return {
        "verified": result.verified if result else None,
        "polls": outcome.attempts,
        "reason": reason,
    }


def merge_outcome(
    part: dict[str, Any], outcome: VerificationOutcome | LocationOutcome, *, location: bool
) -> tuple[RowState, dict[str, Any]] | None:
    """Add one poll outcome to a row's ``part``; return its final state and
    output fields once every outcome the job waits for is in (with ``location``,
    both the verification and the location), else None."""
    if isinstance(outcome, LocationOutcome):
        part.update(_location_json(outcome))
    else:
        part.update(_verification_json(outcome))
        part["state"] = _VERIFICATION_STATES.get(outcome.status, RowState.FAILED)
    if (location and "location_status" not in part) or "state" not in part:
        return None
    result = dict(part)
    return result.pop("state"), result
