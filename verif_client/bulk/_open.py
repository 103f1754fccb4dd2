"""A job as the command line and ``run_job`` see it, and opening the one a
``--journal`` location names: a SQLite file (``_sqlite``) or a Temporal
namespace (``_temporal``), each imported only when named (Temporal is an
optional extra), neither importing this module at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import attrs

from .._ratelimit import Limiter
from ._job import BulkOptions
from ._journal import JournalError

if TYPE_CHECKING:
    from .._client import VerificationClient
    from ._runner import Progress, Stopper
    from ._sqlite import SQLiteJournal


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
