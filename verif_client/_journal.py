"""The bulk job's journal: one row per input row, the truth about each.

Every state change is committed before the next step acts on it, and is a
compare-and-set from the state the caller expects: a row found in any other
state raises :class:`JournalError` rather than being overwritten. A row's life:

    queued -> sending -> sent -> verified | declined | not_verified | failed
    invalid                      (input problem; never sent)
    sending -> unknown           (the request may have reached the service, but
                                  no readable answer came back, or the worker
                                  died while it was in flight; resent only when
                                  the user asks)
    sending -> failed            (the service refused it in an answer we could
                                  read, or it provably never left)

Two backends share this interface and the runner in ``_bulk``: SQLite (one
process, no server; ``_journal_sqlite``) and PostgreSQL (any number of workers
on any number of hosts; ``_journal_pg``). :func:`open_journal` picks one from
the ``--journal`` location.

A worker *claims* the rows it is about to work on. The SQLite journal has one
owner process at a time (an exclusive lock on the file, which the kernel drops
when the owner dies), so a claim is only a cursor; the PostgreSQL journal
records the worker and a lease on the row, so that a dead worker's rows pass
to the living.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Concatenate, Final, ParamSpec, Protocol, TypeVar

import attrs

from ._errors import VerifClientError
from ._ratelimit import Limiter


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


class JournalError(VerifClientError):
    """The journal cannot be used as asked (message says why)."""


class JournalBusyError(JournalError):
    """Another live process owns the SQLite journal."""


def state_mismatch_error(where: str, line: int, expected: str, found: str | None) -> JournalError:
    return JournalError(
        f"{where}: line {line} is {found or 'missing'}, expected {expected}; "
        "another process changed the journal behind this run's back, so it stops"
    )


J = TypeVar("J")
P = ParamSpec("P")
R = TypeVar("R")


def reported(
    errors: type[Exception] | tuple[type[Exception], ...], where: Callable[[J], str]
) -> Callable[[Callable[Concatenate[J, P], R]], Callable[Concatenate[J, P], R]]:
    """A decorator: a storage failure (``errors``) surfaces as a JournalError
    naming the journal (``where(journal)``), which the command line reports in
    one line."""

    def decorate(method: Callable[Concatenate[J, P], R]) -> Callable[Concatenate[J, P], R]:
        @functools.wraps(method)
        def wrapper(journal: J, /, *args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return method(journal, *args, **kwargs)
            except errors as exc:
                raise JournalError(f"{where(journal)}: {str(exc).strip()}") from exc

        return wrapper

    return decorate


def different_input_error() -> JournalError:
    return JournalError(
        "this journal belongs to a different input file; use a new --journal or the original input"
    )


def newer_schema_error(where: str, found: int, known: int) -> JournalError:
    return JournalError(
        f"{where} has journal schema {found}; this verif_client knows "
        f"{known} and older: upgrade verif_client"
    )


@attrs.frozen(slots=True)
class InputRow:
    """One row of the input file as read, problems included."""

    line: int
    phone_number: str | None
    question: str | None
    user_id: str | None
    problem: str | None = None

    # The order of LOADED_COLUMNS: both backends load a row the same way.
    def loaded(self, now: float) -> tuple[Any, ...]:
        """The row as a journal first stores it: ``invalid`` with its reason, else ``queued``."""
        if self.problem:
            state, result, finished_at = "invalid", json.dumps({"reason": self.problem}), now
        else:
            state, result, finished_at = "queued", "{}", None
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
    state: str
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
        """A row as both backends store it: ``RECORD_COLUMNS``, result as JSON text."""
        return cls(
            line, user_id, phone_number, question, state, request_id, sent_at, json.loads(result)
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


class Journal(Protocol):
    """What the bulk runner needs from a journal backend.

    Methods are synchronous. ``blocking`` tells the runner that they wait on a
    server, so it calls them from a worker thread instead of the event loop.
    ``lease_seconds`` is None when rows need no lease (one worker); otherwise
    the runner calls ``renew()`` well within that period for as long as it
    lives, and a row it has not renewed in time may be claimed by another.

    ``mark_sending`` (queued -> sending), ``mark_sent`` (sending -> sent) and
    ``finish`` (``expected`` -> a final state) are compare-and-set: a row in
    another state raises :class:`JournalError`. With leases they also act only
    on a row this worker still holds: they return False (``finish``: None)
    when the row has passed to another worker, and the caller then leaves the
    row alone.
    """

    @property
    def blocking(self) -> bool:
        """Whether the methods wait on a server (the runner then calls them
        from a worker thread).
        """
        ...

    @property
    def lease_seconds(self) -> float | None:
        """How long a worker's claim on a row lasts, or ``None`` (one process)."""
        ...

    def is_loaded(self) -> bool:
        """Whether the job's input has been loaded."""
        ...

    def input_digest(self) -> str | None:
        """The digest of the input the journal is bound to, once loaded."""
        ...

    def load(self, rows: Iterable[InputRow], input_digest: str) -> None:
        """Load the input unless it already is; refuse a different one."""
        ...

    def recover(self, *, resend_unknown: bool) -> int:
        """Rows left in flight by a dead worker become ``unknown``; with
        ``resend_unknown`` every unknown row is queued again. Returns how many
        rows were found in flight."""
        ...

    def claim(self, send: int, poll: int) -> Claim:
        """Up to ``send`` queued rows and ``poll`` sent rows no worker holds."""
        ...

    def work_elsewhere(self) -> bool:
        """Whether rows are unfinished that another worker holds."""
        ...

    def renew(self) -> None:
        """Extend this worker's claims (a no-op without leases)."""
        ...

    def mark_sending(self, line: int) -> bool:
        """``queued`` -> ``sending`` for ``line``, just before its SMS leaves;
        ``False`` if the row is no longer this worker's.
        """
        ...

    def mark_sent(self, line: int, request_id: int) -> bool:
        """``sending`` -> ``sent``, with the request id to poll; ``False`` if
        the row is no longer this worker's.
        """
        ...

    def finish(
        self, line: int, state: str, result: Mapping[str, Any], *, expected: str
    ) -> JobRow | None:
        """Record a row's outcome, from the state ``expected``; the row, or
        ``None`` if it is no longer this worker's.

        Raises:
            JournalError: The row is this worker's but in another state.
        """
        ...

    def finished(self) -> Iterator[JobRow]:
        """The rows that have an outcome, in input order."""
        ...

    def counts(self) -> dict[str, int]:
        """The job's rows counted by state."""
        ...

    def rate_limiter(self, rate: float) -> Limiter:
        """A limiter of ``rate`` requests per second for every worker of the job."""
        ...

    def close(self) -> None:
        """Release the journal (and its lock or connection)."""
        ...


def check_final(state: str) -> None:
    if state not in FINAL_STATES:
        raise ValueError(f"{state!r} is not a final state")


def open_journal(location: str, *, create: bool = True, own: bool = True) -> Journal:
    """Open the journal named on the command line.

    ``postgresql://user@host/db?job=NAME`` (or ``postgres://``) is a job in a
    PostgreSQL database; anything else is a SQLite file path. ``create=False``
    refuses a journal that does not exist yet. ``own=False`` opens a SQLite
    journal to read it only, beside the process that owns it.
    """
    # Imported here: the PostgreSQL backend needs the optional psycopg, and a
    # SQLite user must not pay for importing it.
    if location.startswith(("postgresql://", "postgres://")):
        from ._journal_pg import PostgresJournal

        return PostgresJournal.open(location, create=create)
    from ._journal_sqlite import SQLiteJournal

    return SQLiteJournal(location, create=create, own=own)


def __getattr__(name: str) -> Any:
    # ``from verif_client._journal import SQLiteJournal`` predates the split
    # into one module per backend; a lazy import avoids the import cycle.
    if name == "SQLiteJournal":
        from ._journal_sqlite import SQLiteJournal

        return SQLiteJournal
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
