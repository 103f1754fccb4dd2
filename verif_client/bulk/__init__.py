"""Bulk verification jobs from Python: what ``verif-client bulk run`` does, as a library.

A job sends one SecureLink SMS per row of a CSV, waits for each answer and
writes one JSON line per row. A journal (a SQLite file, or a Temporal
namespace for a job shared by many machines) records every step, so a job
killed at any point resumes where it was and never texts a number twice::

    import anyio
    from verif_client import SANDBOX_BASE_URL, VerificationClient, bulk

    async def main() -> None:
        async with VerificationClient(SANDBOX_BASE_URL, username="u", password="p") as client:
            counts = await bulk.run_job(
                client,
                journal="march.sqlite",
                output="march.jsonl",
                data=await anyio.Path("numbers.csv").read_bytes(),
                options=bulk.BulkOptions(question="Did you ask to pay $25 to ACME?"),
            )
        print(counts)  # rows by state: {"verified": 180, "declined": 3, ...}

    anyio.run(main)

Errors are :class:`verif_client.VerifClientError`\\ s: :class:`BulkInputError`
(the input as a whole cannot make a job; raised before anything is created),
:class:`JournalError` (and :class:`JournalBusyError`: another process owns the
journal), :class:`JobStoppedError` (the credentials were refused, or the
service was unreachable before any SMS was sent: the rows stay queued). Row
states are :class:`RowState`.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from .._client import VerificationClient
from .._public import show_as_public
from ._input import BulkInputError, read_input
from ._input import load_input as load_input  # importable here since 0.1
from ._job import FINAL_STATES, BulkOptions, InputRow, JobRow, RowState
from ._journal import Journal, JournalBusyError, JournalError
from ._open import Job, JobRun, is_temporal, open_job, open_journal
from ._runner import JobStoppedError, Progress, Stopper, run_bulk, write_output

__all__ = [
    "FINAL_STATES",
    "BulkInputError",
    "BulkOptions",
    "InputRow",
    "JobRow",
    "Job",
    "JobRun",
    "JobStoppedError",
    "Journal",
    "JournalBusyError",
    "JournalError",
    "Progress",
    "RowState",
    "Stopper",
    "open_job",
    "open_journal",
    "read_input",
    "run_bulk",
    "run_job",
    "write_output",
]


async def run_job(
    client: VerificationClient,
    *,
    journal: str | Job,
    output: str,
    data: bytes | None = None,
    options: BulkOptions | None = None,
    on_progress: Callable[[Progress], None] = lambda progress: None,
    stopper: Stopper | None = None,
    input_name: str = "input",
) -> dict[str, int]:
    """Run (or resume, or join) a job to its end; return its rows counted by state.

    ``journal`` is a SQLite path, ``temporal://HOST:PORT/NAMESPACE?job=ID``
    (the ``temporal`` extra), or a job already open (:func:`open_job`; left
    open). ``data`` (the input CSV's bytes) is needed for a new job; given
    again it must be the same file. It is checked with ``client``'s own codec
    before the journal is opened: a :class:`BulkInputError` leaves nothing
    behind. ``input_name`` names the input in errors. ``stopper`` ends the run
    early on request (see :class:`Stopper`); unfinished rows then wait in the
    journal for the next run.
    """
    options = options or BulkOptions()
    if data is not None:
        read_input(
            data, options.question, client.codec(), encoding=options.encoding, name=input_name
        )
    elif (
        isinstance(journal, str)
        and not is_temporal(journal)
        and not await anyio.Path(journal).exists()
    ):
        raise BulkInputError(f"{journal}: no such journal; a new job needs its input")
    job = await open_job(journal) if isinstance(journal, str) else journal
    try:
        return await job.run(
            JobRun(client, output, data, options, on_progress, stopper or Stopper(), input_name)
        )
    finally:
        if job is not journal:
            await job.aclose()


show_as_public(__name__, globals(), __all__)
