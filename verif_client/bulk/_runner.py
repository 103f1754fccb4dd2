"""Bulk verification: a CSV of phone numbers in, one JSON line per row out.

The journal is the truth; the output file is rebuilt from it at every start
and appended to as rows finish, so it never holds a row twice and never misses
a finished one, whatever point the previous run was killed at.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping
from typing import IO, Any, Final

import anyio
import anyio.abc
import attrs

from .._client import VerificationClient
from .._errors import (
    AuthenticationError,
    DeliveryUnknownError,
    HTTPStatusError,
    RequestValidationError,
    TransportError,
    VerifClientError,
)
from .._operations import SEND_CONFIRMATION_SMS
from .._polling import LocationOutcome, PollStream, VerificationOutcome
from .._results import RequestResult
from ._job import FINAL_STATES, BulkOptions, JobRow, RowState
from ._journal import Journal, JournalError
from ._outcomes import merge_outcome, outcome_of_failure

_SEND: Final = SEND_CONFIRMATION_SMS
logger = logging.getLogger("verif_client")

# Rows claimed at once: what can start now, and the sent rows of an earlier run.
_CLAIM_BATCH: Final = 20
_POLL_BATCH: Final = 500


@attrs.define
class Progress:
    """Live counts of a run's rows by state, handed to the progress callback."""

    states: Counter[str] = attrs.Factory(Counter)
    deadline: float = 600.0
    stopping: bool = False
    # time.monotonic() of the last SMS this run sent, for the ETA's bound.
    last_sent: float | None = None
    # Requests per second the client is held to after the service answered 429.
    slowed_to: float | None = None

    def move(self, old: RowState, new: RowState) -> None:
        """Count one row moving from state ``old`` to ``new``."""
        self.states[old] -= 1
        self.states[new] += 1

    @property
    def total(self) -> int:
        """How many rows the job has."""
        return sum(self.states.values())

    @property
    def finished(self) -> int:
        """How many rows have an outcome."""
        return sum(self.states[state] for state in FINAL_STATES)

    @property
    def pending(self) -> int:
        """How many rows have none yet."""
        return self.total - self.finished


# -- output ---------------------------------------------------------------


def write_rows(rows: Iterable[JobRow], path: str) -> None:
    """Write ``rows`` to ``path`` as JSON lines, atomically."""
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row.to_output(), ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def write_output(journal: Journal, path: str) -> None:
    """Write every finished row of the journal to ``path``, atomically."""
    write_rows(journal.finished(), path)


def rewrite_output(journal: Journal, path: str) -> IO[str]:
    """Rebuild the output from the journal atomically; return it open for appending."""
    write_output(journal, path)
    return open(path, "a", encoding="utf-8")


# -- the run --------------------------------------------------------------


IN_FLIGHT_STOP_REASON: Final = (
    "the job was stopped while the SMS request was in flight; it may or may not have "
    "been sent (--resend-unknown sends it again, texting twice if it was)"
)


class Stopper:
    """Asks a running job to stop, from the job's own event loop (a signal
    handler task, say).

    The first :meth:`request` stops claiming rows, cancels the sends that
    have not left yet and lets those in flight finish for up to ``grace``
    seconds, so that they are recorded with their request ids; the run then
    returns with unfinished rows left for a later run. A second request stops
    at once: requests still in flight are recorded ``unknown``.
    """

    def __init__(self, grace: float = 10.0) -> None:
        self.grace = grace
        self.requests = 0
        self.reason: str | None = None
        self._listeners: list[Callable[[int], None]] = []

    def request(self, reason: str = "stop requested") -> None:
        """Ask the run to stop (a second request: at once, not gracefully)."""
        self.requests += 1
        self.reason = self.reason or reason
        for listener in list(self._listeners):
            listener(self.requests)

    def listen(self, listener: Callable[[int], None]) -> Callable[[], None]:
        """Call ``listener`` with the request count on each request; returns a
        function that stops listening.
        """
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)


class _Stopping(Exception):
    """The job is stopping: a request not yet written is not written."""


class JobStoppedError(VerifClientError):
    """The job stopped at once on a failure every row would meet: the service
    refused the credentials, or could not be reached before any SMS of this
    run was sent. The rows it met are queued again (nothing was sent for
    them); the same job run again with the right settings carries on."""


def stops_the_job(exc: VerifClientError, anything_sent: bool) -> str | None:
    """Why ``exc`` stops the whole job (None: it is the row's own failure)."""
    if isinstance(exc, AuthenticationError):
        return "the service refused the credentials"
    if (
        isinstance(exc, TransportError)
        and not isinstance(exc, DeliveryUnknownError)
        and not anything_sent
    ):
        # A TransportError of a send proves the request never left.
        return "the service could not be reached before any SMS was sent"
    return None


def stop_message(why: str, exc: VerifClientError) -> str:
    """What :class:`JobStoppedError` says: the cause, and that a rerun carries on."""
    return (
        f"{why} ({type(exc).__name__}: {exc}); the job stopped at once and its rows "
        "stay queued: correct the settings and run the same command again"
    )


def reused_id_reason(request_id: int, holder: int) -> str:
    """Why a row given a request id the service had already given another is ``unknown``."""
    return (
        f"the service answered with request id {request_id}, which it had already given "
        f"line {holder}: this row's answer cannot be told apart, so it is not polled"
    )


async def send_until_accepted(
    client: VerificationClient,
    params: Mapping[str, object],
    before_send: Callable[[], Awaitable[None]],
    *,
    stopping: Callable[[], bool],
    after_attempt: Callable[[], None] = lambda: None,
    refused: Callable[[], None] = lambda: None,
) -> RequestResult:
    """Send; a 429 (refused, not processed: the client has slowed the whole
    run down and waits out its Retry-After) is sent again, until ``stopping()``:
    no row ends ``failed`` because the service asked us to slow down.
    ``refused()`` is called before each such resend: nothing is in flight
    while it waits (``before_send`` runs again once the resend leaves)."""
    while True:
        try:
            return await client.call_with(_SEND, params, before_send=before_send)
        except HTTPStatusError as exc:
            if exc.status_code != 429 or stopping():
                raise
            refused()
        finally:
            after_attempt()


class _Run:
    def __init__(
        self,
        client: VerificationClient,
        journal: Journal,
        output: IO[str],
        options: BulkOptions,
        progress: Progress,
        on_progress: Callable[[Progress], None],
        stopper: Stopper,
    ) -> None:
        self.client = client
        self.journal = journal
        self.output = output
        self.options = options
        self.progress = progress
        self.on_progress = on_progress
        self.stopper = stopper
        self.lines_by_request: dict[int, int] = {}
        self.partial: dict[int, dict[str, Any]] = {}
        # Sends not yet written, by line: a stop cancels them; in-flight ones finish.
        self.not_written: dict[int, anyio.CancelScope] = {}
        self.whole = anyio.CancelScope()
        self.claiming = anyio.CancelScope()
        self.sends_scope: anyio.CancelScope | None = None
        self.feeding = True
        self.task_group: anyio.abc.TaskGroup | None = None
        self.anything_sent = False
        self.stopped_by: JobStoppedError | None = None

    def on_stop(self, requests: int) -> None:
        self.progress.stopping = True
        if requests > 1 or not self.feeding:
            self.whole.cancel()
            return
        self.claiming.cancel()
        for scope in self.not_written.values():
            scope.cancel()
        if self.task_group is not None:
            self.task_group.start_soon(self._end_grace)

    async def _end_grace(self) -> None:
        await anyio.sleep(self.stopper.grace)
        if self.sends_scope is not None:
            self.sends_scope.cancel()

    async def finish(
        self, line: int, state: RowState, result: Mapping[str, Any], expected: RowState
    ) -> None:
        row = self.journal.finish(line, state, result, expected=expected)
        self.output.write(json.dumps(row.to_output(), ensure_ascii=False) + "\n")
        self.output.flush()
        self.progress.move(expected, state)
        self.on_progress(self.progress)

    async def send(self, row: JobRow, stream: PollStream) -> None:
        assert row.phone_number is not None
        assert row.question is not None
        flight = _InFlight(self, row.line)
        params = _SEND.wire_params(row.phone_number, row.question)
        try:
            sent = await self._send_until_accepted(params, flight.mark, flight.refused)
        except _Stopping:
            return  # it stays queued for a later run
        except RequestValidationError as exc:
            # Refused before anything left (e.g. a binding stricter than the one the
            # input was checked with): an input problem, recorded like one.
            flight.mark_unwritten()
            await self.finish(row.line, RowState.INVALID, {"reason": str(exc)}, SENDING)
            return
        except JournalError:
            raise  # the journal cannot record what happens: the run stops
        except VerifClientError as exc:
            await self._send_failed(flight, exc)
            return
        except anyio.get_cancelled_exc_class():
            if flight.written:
                with anyio.CancelScope(shield=True):
                    reason = {"reason": IN_FLIGHT_STOP_REASON}
                    await self.finish(row.line, RowState.UNKNOWN, reason, SENDING)
            raise
        await self._sent(row.line, sent, stream)

    async def _send_failed(self, flight: _InFlight, exc: VerifClientError) -> None:
        why = stops_the_job(exc, self.anything_sent)
        if why is not None:
            flight.requeue()
            self._stop_job(why, exc)
            return
        if isinstance(exc, HTTPStatusError) and exc.status_code == 429:
            # Refused, not processed, as the job stops (the only 429 raised
            # here): queued again for a later run, never failed. (Not
            # written: held by an earlier 429's Retry-After, it never left.)
            flight.requeue()
            return
        written = flight.written
        # Failed before the request was handed over: it never left.
        flight.mark_unwritten()
        state = outcome_of_failure(exc, written=written)
        await self.finish(flight.line, state, {"reason": str(exc)}, SENDING)

    async def _sent(self, line: int, sent: RequestResult, stream: PollStream) -> None:
        if not sent.ok:
            reason = {"reason": sent.error_message or "request id 0"}
            await self.finish(line, RowState.FAILED, reason, SENDING)
            return
        self.anything_sent = True
        holder = self.journal.line_of_request(sent.request_id)
        if holder is not None and holder != line:
            await self._reused_id(line, sent.request_id, holder, SENDING)
            return
        self.journal.mark_sent(line, sent.request_id)
        self.progress.move(RowState.SENDING, RowState.SENT)
        self.progress.last_sent = time.monotonic()
        self.watch(sent.request_id, line, stream, self.options.deadline)

    async def _send_until_accepted(
        self,
        params: Mapping[str, object],
        before_send: Callable[[], Awaitable[None]],
        refused: Callable[[], None],
    ) -> RequestResult:
        def slowed() -> None:
            self.progress.slowed_to = self.client.slowed_to

        return await send_until_accepted(
            self.client,
            params,
            before_send,
            stopping=lambda: self.progress.stopping,
            after_attempt=slowed,
            refused=refused,
        )

    def _stop_job(self, why: str, exc: VerifClientError) -> None:
        """Stop as a first Ctrl-C does: no new sends; those in flight finish
        (meeting the same failure, they are queued again too)."""
        if self.stopped_by is None:
            self.stopped_by = JobStoppedError(stop_message(why, exc))
            self.on_stop(1)

    async def _reused_id(self, line: int, request_id: int, holder: int, state: RowState) -> None:
        """The service gave this row a request id it had already given another:
        an answer to that id cannot be told to be this row's, so the row is
        ``unknown`` (its SMS was probably sent) and never polled."""
        reason = reused_id_reason(request_id, holder)
        await self.finish(line, RowState.UNKNOWN, {"reason": reason}, state)

    def watch(self, request_id: int, line: int, stream: PollStream, timeout: float) -> None:
        self.lines_by_request[request_id] = line
        stream.add(request_id, timeout=max(0.0, timeout))

    async def watch_sent(self, row: JobRow, stream: PollStream) -> None:
        """Poll a row sent earlier, by a previous run or a worker that died."""
        assert row.request_id is not None
        assert row.sent_at is not None
        # A journal written before request ids were checked may hold one twice.
        holder = self.lines_by_request.get(row.request_id)
        if holder is None:
            holder = self.journal.line_of_request(row.request_id)
        if holder is not None and holder != row.line:
            await self._reused_id(row.line, row.request_id, holder, RowState.SENT)
            return
        elapsed = time.time() - row.sent_at
        self.watch(row.request_id, row.line, stream, self.options.deadline - elapsed)

    async def feed(self, stream: PollStream) -> None:
        """Claim rows until none are left (or the job stops): send the queued, poll the sent."""
        slots = anyio.Semaphore(self.options.concurrency)

        async def send_one(row: JobRow) -> None:
            scope = self.not_written[row.line] = anyio.CancelScope()
            try:
                with scope:
                    await self.send(row, stream)
            finally:
                self.not_written.pop(row.line, None)
                slots.release()

        async with anyio.create_task_group() as sends:
            self.sends_scope = sends.cancel_scope
            with self.claiming:
                await self._claim_all(stream, sends, slots, send_one)
        self.feeding = False
        if self.progress.stopping:
            # What was in flight is recorded; rows sent stay "sent" for the next run to poll.
            self.whole.cancel()
            return
        stream.close_input()

    async def _claim_all(
        self,
        stream: PollStream,
        sends: anyio.abc.TaskGroup,
        slots: anyio.Semaphore,
        send_one: Callable[[JobRow], Coroutine[Any, Any, None]],
    ) -> None:
        while not self.progress.stopping:
            # Claim only what can start now: the rest stays for other workers.
            await slots.acquire()
            claim = self.journal.claim(min(_CLAIM_BATCH, slots.value + 1), _POLL_BATCH)
            for row in claim.poll:
                await self.watch_sent(row, stream)
            if not claim.send:
                slots.release()
            for index, row in enumerate(claim.send):
                if index:
                    await slots.acquire()
                sends.start_soon(send_one, row)
            if not (claim.send or claim.poll):
                return

    async def settle(self, outcome: VerificationOutcome | LocationOutcome) -> None:
        line = self.lines_by_request[outcome.request_id]
        part = self.partial.setdefault(line, {})
        settled = merge_outcome(part, outcome, location=self.options.location)
        if settled is None:
            return
        del self.partial[line]
        await self.finish(line, *settled, RowState.SENT)


SENDING: Final = RowState.SENDING


def _library_error(group: BaseExceptionGroup[BaseException]) -> VerifClientError | None:
    for exc in group.exceptions:
        if isinstance(exc, VerifClientError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _library_error(exc)
            if found is not None:
                return found
    return None


@contextlib.contextmanager
def library_error_unwrapped() -> Iterator[None]:
    """The run's task groups wrap a failure in an exception group; the caller
    gets the library's own error (a JournalError, say), as from any call."""
    try:
        yield
    except BaseExceptionGroup as group:
        error = _library_error(group)
        if error is None:
            raise
        raise error from None


async def run_bulk(
    client: VerificationClient,
    journal: Journal,
    output_path: str,
    options: BulkOptions,
    on_progress: Callable[[Progress], None] = lambda progress: None,
    *,
    stopper: Stopper | None = None,
) -> dict[str, int]:
    """Send, poll and record every queued or awaiting row of the journal.

    ``on_progress`` is called with the live :class:`Progress` at the start and
    at every change. With a ``stopper``, the run may end early (see
    :class:`Stopper`); the journal then holds what is left for a later run.
    """
    stopper = stopper or Stopper()
    journal.recover(resend_unknown=options.resend_unknown, resend_failed=options.resend_failed)
    counts = journal.counts()
    progress = Progress(deadline=options.deadline)
    progress.states.update(counts)
    on_progress(progress)
    output = rewrite_output(journal, output_path)
    run = _Run(client, journal, output, options, progress, on_progress, stopper)
    policy = attrs.evolve(options.policy, timeout=options.deadline)
    poll = (
        client.poll_verifications_and_locations if options.location else client.poll_verifications
    )
    unlisten = stopper.listen(run.on_stop)
    try:
        if stopper.requests:
            progress.stopping = True
        with library_error_unwrapped(), run.whole:
            async with (
                poll(policy=policy, keep_open=True, max_concurrency=options.concurrency) as stream,
                anyio.create_task_group() as tg,
            ):
                run.task_group = tg
                tg.start_soon(run.feed, stream)
                async for outcome in stream:
                    await run.settle(outcome)
                tg.cancel_scope.cancel()
    finally:
        unlisten()
        output.close()
    on_progress(progress)
    if run.stopped_by is not None:
        raise run.stopped_by
    return journal.counts()


class _InFlight:
    """A row's send as the journal records it: queued until its request is
    handed over (once the rate limit lets it go), then ``sending``."""

    def __init__(self, run: _Run, line: int) -> None:
        self.run = run
        self.line = line
        self.written = False
        # Its cancel scope while not written: a stop cancels a send not yet written.
        self.unsent = run.not_written.get(line)

    async def mark(self) -> None:
        # Marked only once the rate limit has let the request go: a kill
        # while waiting for a slot leaves the row queued, not unknown.
        if self.written:
            return  # in flight already
        if self.run.progress.stopping:
            raise _Stopping
        self.run.journal.mark_sending(self.line)
        self.run.not_written.pop(self.line, None)
        self.written = True
        self.run.progress.move(RowState.QUEUED, RowState.SENDING)

    def refused(self) -> None:
        # A 429: the request was refused, not processed, and the resend
        # may wait long for its Retry-After (999999999 s). Until it
        # leaves, the row is queued again, and a stop cancels the wait:
        # marked in flight, a Ctrl-C then would end it `unknown`.
        if self.written:
            self.requeue()
            if self.unsent is not None:
                self.run.not_written[self.line] = self.unsent

    def requeue(self) -> None:
        """Queued again, if it was handed over: refused, it was never processed."""
        if self.written:
            self.run.journal.requeue(self.line)
            self.run.progress.move(RowState.SENDING, RowState.QUEUED)
            self.written = False

    def mark_unwritten(self) -> None:
        """``sending`` for a row that meets its final state before it was handed over."""
        if not self.written:
            self.run.journal.mark_sending(self.line)
            self.run.progress.move(RowState.QUEUED, RowState.SENDING)
