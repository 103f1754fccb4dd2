"""The default journal: one SQLite file, one worker process, no server.

SQLite in WAL mode: a committed change survives the process being killed at
any point, which is the failure this journal exists for. One process works a
journal at a time, so it needs no leases: a claim is a cursor over the rows,
and every row left ``sending`` at open was in flight when a process died.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from ._journal import (
    ALL_STATES,
    FINAL_STATES,
    IN_FLIGHT_REASON,
    RECORD_COLUMNS,
    Claim,
    InputRow,
    JobRow,
    JournalError,
    check_final,
    newer_schema_error,
)
from ._ratelimit import RateLimiter

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
"""


class SQLiteJournal:
    """The default journal: one SQLite file, no server."""

    blocking: Final = False
    lease_seconds: Final = None

    def __init__(self, path: str, *, create: bool = True) -> None:
        self.path = path
        if not create and not os.path.exists(path):
            raise JournalError(f"{path}: no such journal")
        try:
            self._db = sqlite3.connect(path, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise JournalError(f"{path}: not a usable journal ({exc})") from None
        version = self._meta("schema_version")
        if version is None:
            self._set_meta("schema_version", str(SCHEMA_VERSION))
        elif int(version) > SCHEMA_VERSION:
            raise newer_schema_error(path, int(version), SCHEMA_VERSION)
        self._next_queued = 0
        self._unpolled: list[JobRow] | None = None

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
        with self._db:
            self._db.execute("BEGIN")
            for row in rows:
                state = "invalid" if row.problem else "queued"
                result = json.dumps({"reason": row.problem}) if row.problem else "{}"
                self._db.execute(
                    "INSERT INTO rows (line, user_id, phone_number, question, state, result,"
                    " finished_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        row.line,
                        row.user_id,
                        row.phone_number,
                        row.question,
                        state,
                        result,
                        time.time() if row.problem else None,
                    ),
                )
            self._set_meta("input_digest", input_digest)

    def recover(self, *, resend_unknown: bool) -> int:
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

    def work_elsewhere(self) -> bool:
        return False

    def renew(self) -> None:
        pass

    def mark_sending(self, line: int) -> bool:
        self._db.execute("UPDATE rows SET state = 'sending' WHERE line = ?", (line,))
        return True

    def mark_sent(self, line: int, request_id: int) -> bool:
        self._db.execute(
            "UPDATE rows SET state = 'sent', request_id = ?, sent_at = ? WHERE line = ?",
            (request_id, time.time(), line),
        )
        return True

    def finish(self, line: int, state: str, result: Mapping[str, Any]) -> JobRow | None:
        check_final(state)
        values = self._db.execute(
            "UPDATE rows SET state = ?, result = ?, finished_at = ? WHERE line = ? "
            f"RETURNING {RECORD_COLUMNS}",
            (state, json.dumps(dict(result)), time.time(), line),
        ).fetchone()
        return JobRow.from_record(*values)

    def row(self, line: int) -> JobRow:
        return self._rows("line = ?", line)[0]

    def finished(self) -> Iterator[JobRow]:
        states = ", ".join(f"'{state}'" for state in sorted(FINAL_STATES))
        yield from self._rows(f"state IN ({states}) ORDER BY line")

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(ALL_STATES, 0)
        for state, count in self._db.execute("SELECT state, COUNT(*) FROM rows GROUP BY state"):
            counts[state] = count
        return counts

    def rate_limiter(self, rate: float) -> RateLimiter:
        return RateLimiter(rate)

    def close(self) -> None:
        self._db.close()
