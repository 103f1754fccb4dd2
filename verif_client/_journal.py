"""The bulk job's journal: one row per input row, the truth about each.

Every state change is committed before the next step acts on it. A row's life:

    queued -> sending -> sent -> verified | declined | not_verified | failed
    invalid                      (input problem; never sent)
    sending -> unknown           (the process died while the SMS was in flight;
                                  resent only when the user asks)

SQLite in WAL mode: a committed change survives the process being killed at
any point, which is the failure this journal exists for.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, Protocol

import attrs

SCHEMA_VERSION: Final = 1
FINAL_STATES: Final = frozenset(
    {"verified", "declined", "not_verified", "failed", "invalid", "unknown"}
)
ALL_STATES: Final = ("queued", "sending", "sent", *sorted(FINAL_STATES))


class JournalError(Exception):
    """The journal cannot be used as asked (message says why)."""


@attrs.frozen(slots=True)
class InputRow:
    """One row of the input file as read, problems included."""

    line: int
    phone_number: str | None
    question: str | None
    user_id: str | None
    problem: str | None = None


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


class Journal(Protocol):
    """What the bulk runner needs from a journal backend."""

    def is_loaded(self) -> bool: ...
    def load(self, rows: Iterable[InputRow], input_digest: str) -> None: ...
    def input_digest(self) -> str | None: ...
    def recover(self, *, resend_unknown: bool) -> int: ...
    def queued(self) -> list[JobRow]: ...
    def awaiting_answer(self) -> list[JobRow]: ...
    def mark_sending(self, line: int) -> None: ...
    def mark_sent(self, line: int, request_id: int) -> None: ...
    def finish(self, line: int, state: str, result: Mapping[str, Any]) -> None: ...
    def finished(self) -> Iterator[JobRow]: ...
    def row(self, line: int) -> JobRow: ...
    def counts(self) -> dict[str, int]: ...
    def close(self) -> None: ...


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

    def __init__(self, path: str) -> None:
        self.path = path
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
            raise JournalError(
                f"{path} has journal schema {version}; this verif_client knows "
                f"{SCHEMA_VERSION} and older: upgrade verif_client"
            )

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
        """Rows caught in flight by a crash become ``unknown``; with
        ``resend_unknown`` every unknown row is queued again. Returns how many
        rows were found in flight."""
        with self._db:
            self._db.execute("BEGIN")
            in_flight = self._db.execute(
                "UPDATE rows SET state = 'unknown', finished_at = ?, result = ? "
                "WHERE state = 'sending'",
                (
                    time.time(),
                    json.dumps(
                        {
                            "reason": "the SMS request was in flight when the job stopped; "
                            "it may or may not have been sent (rerun with --resend-unknown)"
                        }
                    ),
                ),
            ).rowcount
            if resend_unknown:
                self._db.execute(
                    "UPDATE rows SET state = 'queued', finished_at = NULL, result = '{}' "
                    "WHERE state = 'unknown'"
                )
        return in_flight

    def _rows(self, where: str, *args: object) -> list[JobRow]:
        cursor = self._db.execute(
            "SELECT line, user_id, phone_number, question, state, request_id, sent_at, result "
            f"FROM rows WHERE {where} ORDER BY line",
            args,
        )
        return [
            JobRow(line, user_id, phone, question, state, request_id, sent_at, json.loads(result))
            for line, user_id, phone, question, state, request_id, sent_at, result in cursor
        ]

    def queued(self) -> list[JobRow]:
        return self._rows("state = 'queued'")

    def awaiting_answer(self) -> list[JobRow]:
        return self._rows("state = 'sent'")

    def mark_sending(self, line: int) -> None:
        self._db.execute("UPDATE rows SET state = 'sending' WHERE line = ?", (line,))

    def mark_sent(self, line: int, request_id: int) -> None:
        self._db.execute(
            "UPDATE rows SET state = 'sent', request_id = ?, sent_at = ? WHERE line = ?",
            (request_id, time.time(), line),
        )

    def finish(self, line: int, state: str, result: Mapping[str, Any]) -> None:
        if state not in FINAL_STATES:
            raise ValueError(f"{state!r} is not a final state")
        self._db.execute(
            "UPDATE rows SET state = ?, result = ?, finished_at = ? WHERE line = ?",
            (state, json.dumps(dict(result)), time.time(), line),
        )

    def row(self, line: int) -> JobRow:
        return self._rows("line = ?", line)[0]

    def finished(self) -> Iterator[JobRow]:
        states = ", ".join(f"'{state}'" for state in sorted(FINAL_STATES))
        yield from self._rows(f"state IN ({states})")

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(ALL_STATES, 0)
        for state, count in self._db.execute("SELECT state, COUNT(*) FROM rows GROUP BY state"):
            counts[state] = count
        return counts

    def close(self) -> None:
        self._db.close()


def open_journal(location: str) -> Journal:
    """Open the journal named on the command line (a SQLite file path)."""
    return SQLiteJournal(location)
