"""The journal: one record per row of a job, the truth about each.

Every state change is committed before the next step acts on it, and is a
compare-and-set from the state the caller expects: a row found in any other
state raises :class:`JournalError` rather than being overwritten. The row
states are :class:`RowState` (see ``_job``).

One journal implements this row-level interface for the runner in
``_runner``: SQLite (one process, no server; ``_sqlite``). A job spread over
many machines runs on Temporal instead (``_temporal``), whose workflows hold
the rows. :func:`open_journal` picks one from the ``--journal`` location.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

import attrs

from .._errors import VerifClientError
from .._ratelimit import Limiter
from ._job import BulkOptions, Claim, InputRow, JobRow, RowState

if TYPE_CHECKING:
    from .._client import VerificationClient
    from ._runner import Progress, Stopper
    from ._sqlite import SQLiteJournal


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


@attrs.frozen(slots=True)
class JobRun:
    """One run of a job: the client that sends and polls, the input (None to
    join or resume), the output file, how rows are worked, the progress
    callback and what stops it early."""

    client: VerificationClient
    output: str
    data: bytes | None
    options: BulkOptions
    on_progress: Callable[[Progress], None]
    stopper: Stopper
    input_name: str = "input"


class Job(Protocol):
    """A job as ``run_job`` and the command line see it, whichever journal holds it:
    a SQLite file (``_sqlite``) or a Temporal namespace (``_temporal``)."""

    def rate_limiter(self, rate: float) -> Limiter:
        """A limiter of ``rate`` requests per second for the whole job."""
        ...

    async def run(self, run: JobRun) -> dict[str, int]:
        """Load ``run.data`` unless the job has it, work the job to its end (or
        until stopped) and write its finished rows to ``run.output``; return
        the rows counted by state."""
        ...

    async def counts(self) -> dict[str, int]:
        """The job's rows counted by state (``bulk status``)."""
        ...

    async def export(self, path: str) -> dict[str, int]:
        """Write the finished rows to ``path``; return the rows counted by state."""
        ...

    async def aclose(self) -> None:
        """Release what the job holds open (a SQLite file, a Temporal connection)."""
        ...


def is_temporal(location: str) -> bool:
    return location.startswith("temporal://")


def check_location(location: str) -> None:
    """Refuse, in one line, a journal location of the retired PostgreSQL fleet."""
    if location.startswith(("postgresql://", "postgres://")):
        raise JournalError(
            "PostgreSQL journals are retired: multi-machine jobs run on Temporal "
            "(--journal 'temporal://HOST:PORT/NAMESPACE?job=ID'; see docs/fleet.md)"
        )


def open_journal(location: str, *, create: bool = True, own: bool = True) -> SQLiteJournal:
    """Open the SQLite journal at ``location``, the path named on the command line.

    ``create=False`` refuses a journal that does not exist yet. ``own=False``
    opens it to read it only, beside the process that owns it.
    """
    check_location(location)
    # Imported here: _sqlite imports this module's errors.
    from ._sqlite import SQLiteJournal

    return SQLiteJournal(location, create=create, own=own)


async def open_job(location: str, *, create: bool = True, own: bool = True) -> Job:
    """The job named by ``--journal``: ``temporal://...`` or a SQLite path
    (``create`` and ``own`` as for :func:`open_journal`)."""
    check_location(location)
    # Imported here: Temporal is an optional extra, and each backend imports this module.
    if is_temporal(location):
        from ._temporal import TemporalJob

        return await TemporalJob.open(location)
    from ._sqlite import SQLiteJob

    return SQLiteJob(open_journal(location, create=create, own=own))
