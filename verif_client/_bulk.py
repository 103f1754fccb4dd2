"""Bulk verification: a CSV of phone numbers in, one JSON line per row out.

The journal is the truth; the output file is rebuilt from it at every start
and appended to as rows finish, so it never holds a row twice and never misses
a finished one, whatever point the previous run was killed at.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any, Final, TypeVar, TypeVarTuple

import anyio
import attrs

from ._bindings import codec_for
from ._client import VerificationClient
from ._codec import Codec
from ._errors import DeliveryUnknownError, RequestValidationError, VerifClientError
from ._journal import FINAL_STATES, InputRow, JobRow, Journal, different_input_error
from ._operations import get_operation
from ._polling import LocationOutcome, PollPolicy, PollStatus, PollStream, VerificationOutcome
from ._results import RequestResult
from ._service import Binding

_SEND: Final = get_operation("SecureLink_Confirmation_SendRequestViaSms")
_VERIFICATION_STATES: Final = {
    PollStatus.VERIFIED: "verified",
    PollStatus.DECLINED: "declined",
    PollStatus.TIMED_OUT: "not_verified",
    PollStatus.FAILED: "failed",
}


logger = logging.getLogger("verif_client")
T = TypeVar("T")
Ts = TypeVarTuple("Ts")

# Rows a worker claims at once: few, as claimed rows wait for the rate limit
# while another worker could be sending them.
_CLAIM_BATCH: Final = 20
_POLL_BATCH: Final = 500

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


@attrs.define
class Progress:
    """Live counters of a run, handed to the progress callback."""

    total: int = 0
    sent: int = 0
    finished: int = 0
    states: Counter[str] = attrs.Factory(Counter)

    @property
    def pending(self) -> int:
        return self.total - self.finished


# -- input ----------------------------------------------------------------


def read_input(
    data: bytes, default_question: str | None, binding: Binding = Binding.SOAP11
) -> Iterator[InputRow]:
    """Read and check every row; a bad row is reported, never fatal.

    Rows are checked with the very codec that will send them, so what is
    refused here is exactly what the service (or ASP.NET) would refuse.
    """
    codec = codec_for(binding)
    text = data.decode("utf-8-sig", errors="surrogateescape")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = [name.strip().lower() for name in next(reader)]
    except StopIteration:
        return
    except csv.Error as exc:
        yield InputRow(1, None, None, None, f"malformed CSV header: {exc}")
        return
    columns = {name: index for index, name in enumerate(header)}
    seen: dict[str, int] = {}
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield InputRow(reader.line_num, None, None, None, f"malformed CSV line: {exc}")
            continue
        line = reader.line_num
        if not any(field.strip() for field in fields):
            continue

        def column(name: str, fields: list[str] = fields) -> str | None:
            index = columns.get(name)
            return fields[index].strip() if index is not None and index < len(fields) else None

        phone, user_id = column("phone_number"), column("id")
        question = column("question") or default_question
        problem = _row_problem(codec, columns, fields, header, phone, question, seen, line)
        if problem is None and phone is not None:
            seen[phone] = line
        yield InputRow(line, phone, question, user_id, problem)


def _row_problem(
    codec: Codec,
    columns: Mapping[str, int],
    fields: list[str],
    header: list[str],
    phone: str | None,
    question: str | None,
    seen: Mapping[str, int],
    line: int,
) -> str | None:
    if "phone_number" not in columns:
        return "missing column phone_number"
    if len(fields) > len(header):
        return f"has {len(fields)} fields, the header has {len(header)}"
    if not phone:
        return "phone_number is empty"
    if not question:
        return "no question: give a question column or --question"
    try:
        codec.wire_texts(_SEND, {"PhoneNumber": phone, "ConfirmationQuestion": question})
    except RequestValidationError as exc:
        return str(exc)
    if phone in seen:
        return f"duplicate phone_number (first on line {seen[phone]})"
    return None


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_input(journal: Journal, data: bytes, options: BulkOptions, binding: Binding) -> None:
    """Load the input once; a rerun (or another worker) must name the same input, or none."""
    known = journal.input_digest()
    if known is None:
        journal.load(read_input(data, options.question, binding), digest(data))
    elif known != digest(data):
        raise different_input_error()


# -- output ---------------------------------------------------------------


def write_output(journal: Journal, path: str) -> None:
    """Write every finished row of the journal to ``path``, atomically."""
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        for row in journal.finished():
            handle.write(json.dumps(row.to_output(), ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def rewrite_output(journal: Journal, path: str) -> IO[str]:
    """Rebuild the output from the journal atomically; return it open for appending."""
    write_output(journal, path)
    return open(path, "a", encoding="utf-8")


# -- the run --------------------------------------------------------------


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


class _Calls:
    """Makes journal calls: in line for a local journal, from one worker thread
    for a journal that waits on a server (one: its connection serves one
    statement at a time anyway)."""

    def __init__(self, journal: Journal) -> None:
        self._thread = anyio.CapacityLimiter(1) if journal.blocking else None

    async def __call__(self, function: Callable[[*Ts], T], *args: *Ts) -> T:
        if self._thread is None:
            return function(*args)
        return await anyio.to_thread.run_sync(function, *args, limiter=self._thread)


class _RowTaken(Exception):
    """Another worker holds the row: this one must not send it."""


class _Run:
    def __init__(
        self,
        client: VerificationClient,
        journal: Journal,
        output: IO[str],
        options: BulkOptions,
        progress: Progress,
        on_progress: Callable[[Progress], None],
    ) -> None:
        self.client = client
        self.journal = journal
        self.db = _Calls(journal)
        self.output = output
        self.options = options
        self.progress = progress
        self.on_progress = on_progress
        self.lines_by_request: dict[int, int] = {}
        self.partial: dict[int, dict[str, Any]] = {}

    async def finish(self, line: int, state: str, result: Mapping[str, Any]) -> None:
        row = await self.db(self.journal.finish, line, state, result)
        if row is None:
            logger.warning("line %d passed to another worker before it finished here", line)
            return
        self.output.write(json.dumps(row.to_output(), ensure_ascii=False) + "\n")
        self.output.flush()
        self.progress.finished += 1
        self.progress.states[state] += 1
        self.on_progress(self.progress)

    async def send(self, row: JobRow, stream: PollStream) -> None:
        assert row.phone_number is not None
        assert row.question is not None

        async def mark_in_flight() -> None:
            # Marked only once the rate limit has let the request go: a kill
            # while waiting for a slot leaves the row queued, not unknown.
            if not await self.db(self.journal.mark_sending, row.line):
                raise _RowTaken

        params = {"PhoneNumber": row.phone_number, "ConfirmationQuestion": row.question}
        try:
            sent = await self.client.call_with(_SEND, params, before_send=mark_in_flight)
        except _RowTaken:
            return  # another worker holds the row now
        except RequestValidationError as exc:
            # Refused before anything left (e.g. a binding stricter than the one the
            # input was checked with): an input problem, recorded like one.
            if await self.db(self.journal.mark_sending, row.line):
                await self.finish(row.line, "invalid", {"reason": str(exc)})
            return
        except DeliveryUnknownError as exc:
            await self.finish(row.line, "unknown", {"reason": str(exc)})
            return
        except VerifClientError as exc:
            await self.finish(row.line, "failed", {"reason": str(exc)})
            return
        assert isinstance(sent, RequestResult)
        if not sent.ok:
            await self.finish(row.line, "failed", {"reason": sent.error_message or "request id 0"})
            return
        if not await self.db(self.journal.mark_sent, row.line, sent.request_id):
            logger.warning("line %d was declared unknown by another worker while sending", row.line)
            return
        self.progress.sent += 1
        self.watch(sent.request_id, row.line, stream, self.options.deadline)

    def watch(self, request_id: int, line: int, stream: PollStream, timeout: float) -> None:
        self.lines_by_request[request_id] = line
        stream.add(request_id, timeout=max(0.0, timeout))

    def watch_sent(self, row: JobRow, stream: PollStream) -> None:
        """Poll a row sent earlier, by a previous run or a worker that died."""
        assert row.request_id is not None
        assert row.sent_at is not None
        elapsed = time.time() - row.sent_at
        self.watch(row.request_id, row.line, stream, self.options.deadline - elapsed)

    async def feed(self, stream: PollStream) -> None:
        """Claim rows until none are left: send the queued, poll the sent."""
        slots = anyio.Semaphore(self.options.concurrency)

        async def send_one(row: JobRow) -> None:
            try:
                await self.send(row, stream)
            finally:
                slots.release()

        async with anyio.create_task_group() as tg:
            while True:
                # Claim only what can start now: the rest stays for other workers.
                await slots.acquire()
                claim = await self.db(
                    self.journal.claim, min(_CLAIM_BATCH, slots.value + 1), _POLL_BATCH
                )
                for row in claim.poll:
                    self.watch_sent(row, stream)
                if not claim.send:
                    slots.release()
                for index, row in enumerate(claim.send):
                    if index:
                        await slots.acquire()
                    tg.start_soon(send_one, row)
                if claim.send or claim.poll:
                    continue
                if not await self.db(self.journal.work_elsewhere):
                    break
                # Other workers hold what is left; stay to take over should one die.
                assert self.journal.lease_seconds is not None
                await anyio.sleep(self.journal.lease_seconds / 4)
        stream.close_input()

    async def keep_leases(self) -> None:
        lease = self.journal.lease_seconds
        assert lease is not None
        while True:
            await anyio.sleep(lease / 3)
            await self.db(self.journal.renew)

    async def settle(self, outcome: VerificationOutcome | LocationOutcome) -> None:
        line = self.lines_by_request[outcome.request_id]
        part = self.partial.setdefault(line, {})
        if isinstance(outcome, LocationOutcome):
            part.update(_location_json(outcome))
        else:
            part.update(_verification_json(outcome))
            part["state"] = _VERIFICATION_STATES.get(outcome.status, "failed")
        if self.options.location and "location_status" not in part:
            return
        if "state" not in part:
            return
        del self.partial[line]
        state = part.pop("state")
        await self.finish(line, state, part)


async def run_bulk(
    client: VerificationClient,
    journal: Journal,
    output_path: str,
    options: BulkOptions,
    on_progress: Callable[[Progress], None] = lambda progress: None,
) -> dict[str, int]:
    """Send, poll and record every queued or awaiting row of the journal.

    With a shared journal several workers run this at once; each returns when
    no other worker holds unfinished rows and its own rows are finished.
    """
    db = _Calls(journal)
    await db(functools.partial(journal.recover, resend_unknown=options.resend_unknown))
    counts = await db(journal.counts)
    progress = Progress(total=sum(counts.values()))
    progress.states.update({state: counts[state] for state in FINAL_STATES})
    progress.finished = sum(counts[state] for state in FINAL_STATES)
    progress.sent = sum(counts[state] for state in ("sent", "verified", "declined", "not_verified"))
    output = await db(rewrite_output, journal, output_path)
    run = _Run(client, journal, output, options, progress, on_progress)
    policy = attrs.evolve(options.policy, timeout=options.deadline)
    poll = (
        client.poll_verifications_and_locations if options.location else client.poll_verifications
    )
    try:
        async with (
            poll(policy=policy, keep_open=True, max_concurrency=options.concurrency) as stream,
            anyio.create_task_group() as tg,
        ):
            if journal.lease_seconds is not None:
                tg.start_soon(run.keep_leases)
            tg.start_soon(run.feed, stream)
            async for outcome in stream:
                await run.settle(outcome)
            tg.cancel_scope.cancel()
    finally:
        output.close()
    if journal.lease_seconds is not None:
        # Other workers finished rows too: leave this output as complete as the journal.
        await db(write_output, journal, output_path)
    on_progress(progress)
    return await db(journal.counts)
