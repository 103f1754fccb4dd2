"""The default journal: one SQLite file, one worker process, no server.

SQLite in WAL mode: a committed change survives the process being killed at
any point, which is the failure this journal exists for.

One process owns a journal at a time. The owner holds an exclusive ``flock``
on the file for as long as it lives; a second process is refused with the
owner's pid, host and start time (recorded in the journal's ``meta`` table).
The kernel drops the lock the moment the owner dies, however it dies
(SIGKILL included), so a dead owner's hold needs no stale-lock guessing: the
next process takes the lock, and every row left ``sending`` was in flight
when the owner died. The journal needs no leases: a claim is a cursor over
the rows. (Like SQLite itself, this wants a local filesystem.)
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import pathlib
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .._ratelimit import RateLimiter
from ._input import BulkInputError, load_input
from ._job import (
    ALL_STATES,
    FINAL_STATES,
    IN_FLIGHT_REASON,
    LOADED_COLUMNS,
    RECORD_COLUMNS,
    Claim,
    InputRow,
    JobRow,
    RowState,
    check_final,
)
from ._journal import (
    JournalBusyError,
    JournalError,
    newer_schema_error,
    reported,
    state_mismatch_error,
)
from ._runner import run_bulk, write_output

if TYPE_CHECKING:
    from ._open import JobRun

SCHEMA_VERSION: Final = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows (
    line INTEGER PRIMARY KEY,
    user_id TEXT,
    phone_number TEXT,
    question TEXT,
    state TEXT NOT NULL,
    request_id INTEGER,
    sent_at REAL,
    finished_at REAL,
    result TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS rows_state ON rows (state);
CREATE INDEX IF NOT EXISTS rows_request ON rows (request_id);
"""


# A database failure (disk full, file corrupted or made read-only under the
# run) surfaces as a JournalError naming the file.
def _where(journal: SQLiteJournal) -> str:
    return journal.path


_reported: Final = reported(sqlite3.Error, _where)
_REPORTED_METHODS: Final = (
    "is_loaded",
    "input_digest",
    "load",
    "recover",
    "queued",
    "awaiting_answer",
    "claim",
    "mark_sending",
    "requeue",
    "line_of_request",
    "mark_sent",
    "finish",
    "row",
    "counts",
)
_Class = TypeVar("_Class", bound=type)


def _storage_failures_reported(cls: _Class) -> _Class:
    """Wrap ``_REPORTED_METHODS`` with ``_reported``. Once, on the class, not
    as a decorator on each method: mutation testing (``nox -s mutate``) leaves
    decorated functions alone, and these hold the rows' state transitions."""
    for name in _REPORTED_METHODS:
        setattr(cls, name, _reported(getattr(cls, name)))
    return cls


def _owner_of(path: str) -> str:
    """Who holds the journal, as its owner recorded it (read without the lock)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'owner'").fetchone()
        finally:
            db.close()
        owner = json.loads(row[0])
        return f"pid {owner['pid']} on {owner['host']} since {owner['since']}"
    except (sqlite3.Error, TypeError, ValueError, KeyError):
        return "a process that is still starting"


@_storage_failures_reported
class SQLiteJournal:
    """The default journal: one SQLite file, no server."""

    def __init__(self, path: str, *, create: bool = True, own: bool = True) -> None:
        self.path = path
        if not create and not os.path.exists(path):
            raise JournalError(f"{path}: no such journal")
        self._lock: int | None = None
        if own:
            self._lock = self._take_ownership(create)
        try:
            if own:
                self._db = sqlite3.connect(path, isolation_level=None)
            else:
                # A reader never writes: not even WAL mode or the schema, so a
                # file that is not a journal is left exactly as it was.
                uri = pathlib.Path(path).absolute().as_uri() + "?mode=ro"
                self._db = sqlite3.connect(uri, uri=True, isolation_level=None)
            tables = {name for (name,) in self._db.execute("SELECT name FROM sqlite_master")}
            if tables and not {"meta", "rows"} <= tables:
                raise JournalError(
                    f"{path}: not a verif-client journal (a SQLite database with other "
                    "tables); name a journal, or a new file for a new job"
                )
            if own:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.executescript(_SCHEMA)
            version = self._meta("schema_version") if own or tables else None
            if version is None and own:
                self._set_meta("schema_version", str(SCHEMA_VERSION))
            elif version is None:
                raise JournalError(f"{path}: not a verif-client journal (no rows were ever loaded)")
            elif int(version) > SCHEMA_VERSION:
                raise newer_schema_error(path, int(version), SCHEMA_VERSION)
            if own:
                since = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
                owner = {"pid": os.getpid(), "host": socket.gethostname(), "since": since}
                self._set_meta("owner", json.dumps(owner))
        except JournalError:
            self._release()
            raise
        except (sqlite3.Error, ValueError) as exc:
            self._release()
            raise JournalError(f"{path}: not a usable journal ({exc})") from None
        except BaseException:
            self._release()
            raise
        self._next_queued = 0
        self._unpolled: list[JobRow] | None = None

    def _take_ownership(self, create: bool) -> int:
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        try:
            fd = os.open(self.path, flags, 0o666)
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot open the journal ({exc.strerror})") from None
        try:
            # flock, not SQLite's own POSIX locks: those are per process and
            # dropped by any close() of the file, flock belongs to this fd only.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise JournalBusyError(
                f"{self.path}: in use by {_owner_of(self.path)}; "
                "one process works a journal at a time"
            ) from None
        return fd

    def _release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # closing the fd drops the flock
            self._lock = None

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def is_loaded(self) -> bool:
        return self._meta("input_digest") is not None

    def input_digest(self) -> str | None:
        return self._meta("input_digest")

    def load(self, rows: Iterable[InputRow], input_digest: str) -> None:
        now = time.time()
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                f"INSERT INTO rows ({LOADED_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (row.loaded(now) for row in rows),
            )
            self._set_meta("input_digest", input_digest)

    def recover(self, *, resend_unknown: bool, resend_failed: bool = False) -> int:
        with self._db:
            self._db.execute("BEGIN")
            in_flight = self._db.execute(
                "UPDATE rows SET state = 'unknown', finished_at = ?, result = ? "
                "WHERE state = 'sending'",
                (time.time(), json.dumps({"reason": IN_FLIGHT_REASON})),
            ).rowcount
            if resend_unknown:
                self._db.execute(
                    "UPDATE rows SET state = 'queued', finished_at = NULL, result = '{}' "
                    "WHERE state = 'unknown'"
                )
            if resend_failed:
                # Without a request id the service never took the SMS; a row
                # that failed while polling was texted and is never resent.
                self._db.execute(
                    "UPDATE rows SET state = 'queued', finished_at = NULL, result = '{}' "
                    "WHERE state = 'failed' AND request_id IS NULL"
                )
        return in_flight

    def _rows(self, where: str, *args: object) -> list[JobRow]:
        cursor = self._db.execute(f"SELECT {RECORD_COLUMNS} FROM rows WHERE {where}", args)
        return [JobRow.from_record(*values) for values in cursor]

    def queued(self) -> list[JobRow]:
        return self._rows("state = 'queued' ORDER BY line")

    def awaiting_answer(self) -> list[JobRow]:
        return self._rows("state = 'sent' ORDER BY line")

    def claim(self, send: int, poll: int) -> Claim:
        # Rows sent by an earlier run are handed out once; rows this run sends
        # it polls itself, so they are never claimed.
        if self._unpolled is None:
            self._unpolled = self.awaiting_answer()[::-1]
        polls = [self._unpolled.pop() for _ in range(min(poll, len(self._unpolled)))]
        sends = self._rows(
            "state = 'queued' AND line > ? ORDER BY line LIMIT ?", self._next_queued, send
        )
        if sends:
            self._next_queued = sends[-1].line
        return Claim(send=sends, poll=polls)

    def _mismatch(self, line: int, expected: str) -> JournalError:
        found = self._db.execute("SELECT state FROM rows WHERE line = ?", (line,)).fetchone()
        return state_mismatch_error(self.path, line, expected, found and found[0])

    def _changed(self, line: int, expected: str, changed: int) -> None:
        if changed != 1:
            raise self._mismatch(line, expected)

    def _move(self, line: int, expected: RowState, new: RowState) -> None:
        changed = self._db.execute(
            "UPDATE rows SET state = ? WHERE line = ? AND state = ?", (new, line, expected)
        ).rowcount
        self._changed(line, expected, changed)

    def mark_sending(self, line: int) -> None:
        self._move(line, RowState.QUEUED, RowState.SENDING)

    def requeue(self, line: int) -> None:
        self._move(line, RowState.SENDING, RowState.QUEUED)

    def line_of_request(self, request_id: int) -> int | None:
        found = self._db.execute(
            "SELECT line FROM rows WHERE request_id = ? ORDER BY line LIMIT 1", (request_id,)
        ).fetchone()
        return None if found is None else int(found[0])

    def mark_sent(self, line: int, request_id: int) -> None:
        changed = self._db.execute(
            "UPDATE rows SET state = 'sent', request_id = ?, sent_at = ? "
            "WHERE line = ? AND state = 'sending'",
            (request_id, time.time(), line),
        ).rowcount
        self._changed(line, RowState.SENDING, changed)

    def finish(
        self, line: int, state: RowState, result: Mapping[str, Any], *, expected: RowState
    ) -> JobRow:
        check_final(state)
        values = self._db.execute(
            "UPDATE rows SET state = ?, result = ?, finished_at = ? WHERE line = ? AND state = ? "
            f"RETURNING {RECORD_COLUMNS}",
            (state, json.dumps(dict(result)), time.time(), line, expected),
        ).fetchone()
        if values is None:
            raise self._mismatch(line, expected)
        return JobRow.from_record(*values)

    def row(self, line: int) -> JobRow:
        return self._rows("line = ?", line)[0]

    def finished(self) -> Iterator[JobRow]:
        states = ", ".join(f"'{state}'" for state in sorted(FINAL_STATES))
        try:
            rows = self._rows(f"state IN ({states}) ORDER BY line")
        except sqlite3.Error as exc:
            raise JournalError(f"{self.path}: {exc}") from exc
        yield from rows

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(ALL_STATES, 0)
        for state, count in self._db.execute("SELECT state, COUNT(*) FROM rows GROUP BY state"):
            counts[state] = count
        return counts

    def rate_limiter(self, rate: float) -> RateLimiter:
        return RateLimiter(rate)

    def close(self) -> None:
        try:
            if self._lock is not None:
                self._db.execute("DELETE FROM meta WHERE key = 'owner'")
        except sqlite3.Error:
            pass  # the owner record is only read while the lock is held
        finally:
            self._db.close()
            self._release()


class SQLiteJob:
    """A job in a SQLite journal, worked by this process (see ``_runner``)."""

    def __init__(self, journal: SQLiteJournal) -> None:
        self.journal = journal

    def rate_limiter(self, rate: float) -> RateLimiter:
        return self.journal.rate_limiter(rate)

    async def run(self, run: JobRun) -> dict[str, int]:
        codec = run.client.codec()
        if run.data is not None:
            load_input(self.journal, run.data, run.options, codec, name=run.input_name)
        elif not self.journal.is_loaded():
            raise BulkInputError(f"{self.journal.path}: a new journal needs its input")
        return await run_bulk(
            run.client, self.journal, run.output, run.options, run.on_progress, stopper=run.stopper
        )

    async def counts(self) -> dict[str, int]:
        return self.journal.counts()

    async def export(self, path: str) -> dict[str, int]:
        write_output(self.journal, path)
        return self.journal.counts()

    async def aclose(self) -> None:
        self.journal.close()
