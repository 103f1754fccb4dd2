"""A bulk job's rows: what the input made of each, and the state each is in.

A row's life:

    queued -> sending -> sent -> verified | declined | not_verified | failed
    invalid                      (input problem; never sent)
    sending -> unknown           (the request may have reached the service, but
                                  no readable answer came back, or the worker
                                  died while it was in flight; resent only when
                                  the user asks)
    sending -> failed            (the service refused it in an answer we could
                                  read, or it provably never left)
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Any, Final

import attrs

from .._pollpolicy import PollPolicy


class RowState(enum.StrEnum):
    """The state of one row of a bulk job (stored and printed as its value)."""

    QUEUED = "queued"
    SENDING = "sending"
    SENT = "sent"
    VERIFIED = "verified"
    DECLINED = "declined"
    NOT_VERIFIED = "not_verified"
    FAILED = "failed"
    INVALID = "invalid"
    UNKNOWN = "unknown"


FINAL_STATES: Final = frozenset(
    {
        RowState.VERIFIED,
        RowState.DECLINED,
        RowState.NOT_VERIFIED,
        RowState.FAILED,
        RowState.INVALID,
        RowState.UNKNOWN,
    }
)
ALL_STATES: Final = (RowState.QUEUED, RowState.SENDING, RowState.SENT, *sorted(FINAL_STATES))
RECORD_COLUMNS: Final = "line, user_id, phone_number, question, state, request_id, sent_at, result"
IN_FLIGHT_REASON: Final = (
    "the SMS request was in flight when the job's process died; it may or may not have "
    "been sent (--resend-unknown sends it again, texting twice if it was)"
)


@attrs.frozen(slots=True)
class InputRow:
    """One row of the input file as read, problems included."""

    line: int
    phone_number: str | None
    question: str | None
    user_id: str | None
    problem: str | None = None

    # The order of LOADED_COLUMNS.
    def loaded(self, now: float) -> tuple[Any, ...]:
        """The row as a journal first stores it: ``invalid`` with its reason, else ``queued``."""
        if self.problem:
            state, result, finished_at = RowState.INVALID, json.dumps({"reason": self.problem}), now
        else:
            state, result, finished_at = RowState.QUEUED, "{}", None
        return (
            self.line,
            self.user_id,
            self.phone_number,
            self.question,
            state,
            result,
            finished_at,
        )


LOADED_COLUMNS: Final = "line, user_id, phone_number, question, state, result, finished_at"


@attrs.frozen(slots=True)
class JobRow:
    """One row of the journal."""

    line: int
    user_id: str | None
    phone_number: str | None
    question: str | None
    state: RowState
    request_id: int | None
    sent_at: float | None
    result: Mapping[str, Any]

    @classmethod
    def from_record(
        cls,
        line: int,
        user_id: str | None,
        phone_number: str | None,
        question: str | None,
        state: str,
        request_id: int | None,
        sent_at: float | None,
        result: str,
    ) -> JobRow:
        """A row as the journal stores it: ``RECORD_COLUMNS``, result as JSON text."""
        return cls(
            line,
            user_id,
            phone_number,
            question,
            RowState(state),
            request_id,
            sent_at,
            json.loads(result),
        )

    def to_output(self) -> dict[str, Any]:
        """The JSON object written to the output file for a finished row."""
        return {
            "line": self.line,
            "id": self.user_id,
            "phone_number": self.phone_number,
            "status": self.state,
            "request_id": self.request_id,
            **self.result,
        }


@attrs.frozen(slots=True)
class Claim:
    """Rows handed to one worker: ``send`` are queued, ``poll`` await an answer."""

    send: list[JobRow]
    poll: list[JobRow]


def is_resent(
    state: str, request_id: int | None, *, resend_unknown: bool, resend_failed: bool
) -> bool:
    """Whether ``--resend-unknown``/``--resend-failed`` queue a row again: a
    failed row only without a request id (the service never took its SMS; a
    row that failed while polling was texted and is never resent). The SQLite
    journal says the same in SQL (``_sqlite.SQLiteJournal.recover``)."""
    if state == RowState.UNKNOWN:
        return resend_unknown
    return resend_failed and state == RowState.FAILED and request_id is None


def check_final(state: str) -> None:
    if state not in FINAL_STATES:
        raise ValueError(f"{state!r} is not a final state")


# A "no" is final once the service has shown it says "not yet" with nil; a
# service answering a plain bool says false until the owner acts (see PollPolicy).
BULK_POLL_POLICY: Final = PollPolicy(false_means="auto")


@attrs.frozen(slots=True)
class BulkOptions:
    """How a bulk job runs. ``deadline`` counts from each row's SMS."""

    question: str | None = None
    location: bool = False
    concurrency: int = 50
    deadline: float = 600.0
    resend_unknown: bool = False
    policy: PollPolicy = BULK_POLL_POLICY
    encoding: str | None = None
    resend_failed: bool = False
