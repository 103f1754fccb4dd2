"""The journal: one record per row of a job, the truth about each.

Every state change is committed before the next step acts on it, and is a
compare-and-set from the state the caller expects: a row found in any other
state raises :class:`JournalError` rather than being overwritten. The row
states are :class:`RowState` (see ``_job``).

One journal implements this row-level interface for the runner in
``_runner``: SQLite (one process, no server; ``_sqlite``). A job spread over
many machines runs on Temporal instead (``_temporal``), whose workflows hold
the rows. ``_open`` opens the one a ``--journal`` location names; this module
imports neither.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from .._errors import VerifClientError
from .._ratelimit import Limiter
from ._job import Claim, InputRow, JobRow, RowState


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


class Journal(Protocol):
    """What the bulk runner needs from a journal.

    ``mark_sending`` (queued -> sending), ``mark_sent`` (sending -> sent) and
    ``finish`` (``expected`` -> a final state) are compare-and-set: a row in
    another state raises :class:`JournalError`.
    """

    def is_loaded(self) -> bool:
        """Whether the job's input has been loaded."""
        ...

    def input_digest(self) -> str | None:
        """The digest of the input the journal is bound to, once loaded."""
        ...

    def load(self, rows: Iterable[InputRow], input_digest: str) -> None:
        """Load the input unless it already is; refuse a different one."""
        ...

    def recover(self, *, resend_unknown: bool, resend_failed: bool = False) -> int:
        """Rows left in flight by a dead run become ``unknown``; with
        ``resend_unknown`` every unknown row is queued again, with
        ``resend_failed`` every row whose send failed for good (no request
        id: the service refused it, or it never left). Returns how many rows
        were found in flight."""
        ...

    def claim(self, send: int, poll: int) -> Claim:
        """Up to ``send`` queued rows and ``poll`` sent rows not handed out yet."""
        ...

    def mark_sending(self, line: int) -> None:
        """``queued`` -> ``sending`` for ``line``, just before its SMS leaves."""
        ...

    def line_of_request(self, request_id: int) -> int | None:
        """The row the service's request id was recorded for, if any."""
        ...

    def requeue(self, line: int) -> None:
        """sending -> queued: the request was refused in a way that proves no
        SMS left (the job stops on it, see ``_runner``)."""
        ...

    def mark_sent(self, line: int, request_id: int) -> None:
        """``sending`` -> ``sent``, with the request id to poll."""
        ...

    def finish(
        self, line: int, state: RowState, result: Mapping[str, Any], *, expected: RowState
    ) -> JobRow:
        """Record a row's outcome, from the state ``expected``; returns the row."""
        ...

    def finished(self) -> Iterator[JobRow]:
        """The rows that have an outcome, in input order."""
        ...

    def counts(self) -> dict[str, int]:
        """The job's rows counted by state."""
        ...

    def rate_limiter(self, rate: float) -> Limiter:
        """A limiter of ``rate`` requests per second for the job."""
        ...

    def close(self) -> None:
        """Release the journal (and its lock)."""
        ...
