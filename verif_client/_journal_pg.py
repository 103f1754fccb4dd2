"""The PostgreSQL journal: one bulk job shared by any number of workers.

``postgresql://user@host/db?job=NAME[&lease=SECONDS]`` names a job; every
worker started with it shares the job's rows, with no coordinator:

* A worker claims a few rows at a time (``SELECT ... FOR UPDATE SKIP LOCKED``,
  so two workers never wait on, nor take, the same row) and stamps them with
  its id and a lease; it renews the leases of all its rows while it lives.
* Every state change is a compare-and-set on the row still being the
  worker's and in the state the worker expects (``WHERE worker = me AND
  state = expected``): a worker whose lease lapsed and whose row was taken
  over changes nothing, so a row has one outcome whoever races; a row still
  the worker's but in another state is an error (JournalError), never
  overwritten.
* A row whose lease expired passes on by state: ``queued`` is claimed again,
  ``sent`` is polled by its new holder, and ``sending`` (the SMS was in flight
  when its worker died) becomes ``unknown`` and is never sent again unless a
  worker is started with ``--resend-unknown``.
* The job's rate limit is one GCRA row (see :class:`PostgresRateLimiter`).

Lease times are the database server's clock (``now()``), so the workers'
clocks need not agree. Calls block: the runner makes them from a worker
thread, which also keeps the backend usable under trio.
"""

from __future__ import annotations

import datetime
import json
import os
import secrets
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio

from ._journal import (
    ALL_STATES,
    FINAL_STATES,
    IN_FLIGHT_REASON,
    LOADED_COLUMNS,
    RECORD_COLUMNS,
    Claim,
    InputRow,
    JobRow,
    JournalError,
    check_final,
    different_input_error,
    newer_schema_error,
    reported,
    state_mismatch_error,
)
from ._ratelimit import gcra_parameters

try:
    import psycopg
    from psycopg.rows import TupleRow
except ImportError:  # pragma: no cover - depends on the installed extras
    raise JournalError(
        "a postgresql:// journal needs psycopg: pip install 'verif-client[postgres]'"
    ) from None

SCHEMA_VERSION: Final = 1
DEFAULT_LEASE_SECONDS: Final = 30.0
# Any constant will do: it only has to be the same for every worker.
_MIGRATION_LOCK: Final = 0x7665726966
_OPEN_STATES: Final = ("queued", "sending", "sent")

# Step n takes a database from schema n - 1 to n; a step is never edited once
# released, a change is a new step.
_MIGRATIONS: Final[dict[int, str]] = {
    1: """
        CREATE TABLE verif_jobs (
            job text PRIMARY KEY,
            input_digest text,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE verif_job_rates (
            job text PRIMARY KEY REFERENCES verif_jobs ON DELETE CASCADE,
            tat timestamptz NOT NULL DEFAULT '-infinity'
        );
        CREATE TABLE verif_rows (
            job text NOT NULL REFERENCES verif_jobs ON DELETE CASCADE,
            line integer NOT NULL,
            user_id text,
            phone_number text,
            question text,
            state text NOT NULL,
            request_id bigint,
            sent_at double precision,
            finished_at double precision,
            result text NOT NULL DEFAULT '{}',
            worker text,
            lease_expires timestamptz,
            PRIMARY KEY (job, line)
        );
        CREATE INDEX verif_rows_open ON verif_rows (job, state, line)
            WHERE state IN ('queued', 'sending', 'sent');
    """,
}


def _where(journal: PostgresJournal) -> str:
    return journal._where


# A database failure surfaces as a JournalError naming the job, which the
# command line reports in one line (the worker's leases then lapse and its
# rows pass to the others).
_reported: Final = reported(psycopg.Error, _where)


def parse_location(location: str) -> tuple[str, str, float]:
    """Split ``postgresql://...?job=NAME&lease=S`` into (conninfo, job, lease)."""
    parts = urlsplit(location)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {key: value for key, value in query if key in ("job", "lease")}
    job = ours.get("job", "")
    if not job:
        raise JournalError(f"{_display(location)}: name the job, e.g. ...?job=march-campaign")
    try:
        lease = float(ours.get("lease", DEFAULT_LEASE_SECONDS))
    except ValueError:
        lease = -1.0
    if not lease > 0:
        raise JournalError(f"{_display(location)}: lease must be a number of seconds > 0")
    rest = urlencode([(key, value) for key, value in query if key not in ours])
    return urlunsplit(parts._replace(query=rest)), job, lease


def _display(location: str) -> str:
    """The location without its password, for messages."""
    parts = urlsplit(location)
    if parts.password is None:
        return location
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _connect(conninfo: str, where: str) -> psycopg.Connection[TupleRow]:
    try:
        return psycopg.connect(conninfo, autocommit=True)
    except psycopg.Error as exc:
        raise JournalError(f"{where}: cannot connect ({str(exc).strip()})") from None


def migrate(db: psycopg.Connection[TupleRow], where: str) -> None:
    """Bring the database's schema to ``SCHEMA_VERSION``; refuse a newer one."""
    with db.transaction():
        # Workers starting together would otherwise race to create the tables.
        db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        db.execute(
            "CREATE TABLE IF NOT EXISTS verif_journal_meta "
            "(key text PRIMARY KEY, value text NOT NULL)"
        )
        row = db.execute(
            "SELECT value FROM verif_journal_meta WHERE key = 'schema_version'"
        ).fetchone()
        version = 0 if row is None else int(row[0])
        if version > SCHEMA_VERSION:
            raise newer_schema_error(where, version, SCHEMA_VERSION)
        if version == SCHEMA_VERSION:
            return
        for step in range(version + 1, SCHEMA_VERSION + 1):
            db.execute(_MIGRATIONS[step])
        db.execute(
            "INSERT INTO verif_journal_meta (key, value) VALUES ('schema_version', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(SCHEMA_VERSION),),
        )


class PostgresJournal:
    """One job in a PostgreSQL database, shared by every worker that opens it."""

    blocking: Final = True

    def __init__(self, conninfo: str, job: str, *, lease_seconds: float, create: bool) -> None:
        self.job = job
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.lease_seconds = lease_seconds
        self._conninfo = conninfo
        self._where = f"{_display(conninfo)} job {job!r}"
        self._db = _connect(conninfo, self._where)
        self._limiters: list[PostgresRateLimiter] = []
        try:
            migrate(self._db, self._where)
            if create:
                self._db.execute(
                    "WITH job AS (INSERT INTO verif_jobs (job) VALUES (%(job)s) "
                    "ON CONFLICT DO NOTHING RETURNING job) "
                    "INSERT INTO verif_job_rates (job) SELECT job FROM job",
                    {"job": job},
                )
            elif not self._db.execute("SELECT 1 FROM verif_jobs WHERE job = %s", (job,)).fetchone():
                raise JournalError(f"{self._where}: no such job")
        except BaseException:
            self._db.close()
            raise

    @classmethod
    def open(cls, location: str, *, create: bool = True) -> PostgresJournal:
        conninfo, job, lease = parse_location(location)
        return cls(conninfo, job, lease_seconds=lease, create=create)

    def __repr__(self) -> str:
        return f"<PostgresJournal {self._where} worker={self.worker}>"

    @property
    def _lease(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=self.lease_seconds)

    @_reported
    def input_digest(self) -> str | None:
        # FOR SHARE waits while a first worker is still loading the input.
        row = self._db.execute(
            "SELECT input_digest FROM verif_jobs WHERE job = %s FOR SHARE", (self.job,)
        ).fetchone()
        return None if row is None else row[0]

    def is_loaded(self) -> bool:
        return self.input_digest() is not None

    @_reported
    def load(self, rows: Iterable[InputRow], input_digest: str) -> None:
        with self._db.transaction():
            # The first worker to arrive loads; the others queue on this lock
            # and find the input loaded when they get it.
            (known,) = self._one(
                "SELECT input_digest FROM verif_jobs WHERE job = %s FOR UPDATE", (self.job,)
            )
            if known == input_digest:
                return
            if known is not None:
                raise different_input_error()
            now = time.time()
            with (
                self._db.cursor() as cursor,
                cursor.copy(f"COPY verif_rows (job, {LOADED_COLUMNS}) FROM STDIN") as copy,
            ):
                for row in rows:
                    copy.write_row((self.job, *row.loaded(now)))
            self._db.execute(
                "UPDATE verif_jobs SET input_digest = %s WHERE job = %s", (input_digest, self.job)
            )

    def _one(self, query: str, params: Any) -> tuple[Any, ...]:
        row = self._db.execute(query, params).fetchone()
        if row is None:
            raise JournalError(f"{self._where}: the job has been deleted")
        return row

    def _reap(self) -> int:
        """Rows whose worker died with the SMS in flight become ``unknown``."""
        return self._db.execute(
            "WITH dead AS MATERIALIZED (SELECT line FROM verif_rows "
            "  WHERE job = %(job)s AND state = 'sending' AND lease_expires < now() "
            "  FOR UPDATE SKIP LOCKED) "
            "UPDATE verif_rows r SET state = 'unknown', finished_at = %(now)s, "
            "result = %(result)s, worker = NULL, lease_expires = NULL "
            "FROM dead WHERE r.job = %(job)s AND r.line = dead.line",
            {
                "job": self.job,
                "now": time.time(),
                "result": json.dumps({"reason": IN_FLIGHT_REASON}),
            },
        ).rowcount

    @_reported
    def recover(self, *, resend_unknown: bool) -> int:
        with self._db.transaction():
            in_flight = self._reap()
            if resend_unknown:
                self._db.execute(
                    "UPDATE verif_rows SET state = 'queued', finished_at = NULL, result = '{}', "
                    "worker = NULL, lease_expires = NULL WHERE job = %s AND state = 'unknown'",
                    (self.job,),
                )
        return in_flight

    def _take(self, state: str, limit: int) -> list[JobRow]:
        if limit <= 0:
            return []
        columns = ", ".join(f"r.{column}" for column in RECORD_COLUMNS.split(", "))
        cursor = self._db.execute(
            # MATERIALIZED: a subquery with LIMIT inside UPDATE may be run
            # again per joined row and so hand out more rows than asked for.
            "WITH free AS MATERIALIZED (SELECT line FROM verif_rows "
            "  WHERE job = %(job)s AND state = %(state)s "
            "  AND (lease_expires IS NULL OR lease_expires < now()) "
            "  AND worker IS DISTINCT FROM %(me)s "
            "  ORDER BY line LIMIT %(limit)s FOR UPDATE SKIP LOCKED) "
            "UPDATE verif_rows r SET worker = %(me)s, lease_expires = now() + %(lease)s "
            f"FROM free WHERE r.job = %(job)s AND r.line = free.line RETURNING {columns}",
            {
                "job": self.job,
                "me": self.worker,
                "lease": self._lease,
                "state": state,
                "limit": limit,
            },
        )
        return sorted((JobRow.from_record(*values) for values in cursor), key=lambda r: r.line)

    @_reported
    def claim(self, send: int, poll: int) -> Claim:
        with self._db.transaction():
            self._reap()
            return Claim(send=self._take("queued", send), poll=self._take("sent", poll))

    @_reported
    def work_elsewhere(self) -> bool:
        (exists,) = self._one(
            "SELECT EXISTS (SELECT 1 FROM verif_rows WHERE job = %s AND state = ANY(%s) "
            "AND worker IS DISTINCT FROM %s)",
            (self.job, list(_OPEN_STATES), self.worker),
        )
        return bool(exists)

    @_reported
    def renew(self) -> None:
        self._db.execute(
            "UPDATE verif_rows SET lease_expires = now() + %s "
            "WHERE job = %s AND worker = %s AND state = ANY(%s)",
            (self._lease, self.job, self.worker, list(_OPEN_STATES)),
        )

    def _mine(self, line: int, state: str, assignments: str, **values: Any) -> bool:
        changed = self._db.execute(
            f"UPDATE verif_rows SET {assignments} "
            "WHERE job = %(job)s AND line = %(line)s AND worker = %(me)s AND state = %(was)s",
            {"job": self.job, "line": line, "me": self.worker, "was": state, **values},
        ).rowcount
        return changed == 1 or self._lost(line, state)

    def _lost(self, line: int, expected: str) -> bool:
        """After a compare-and-set changed nothing: False when the row passed to
        another worker (its lease lapsed), an error when it is still ours in a
        state we did not expect."""
        row = self._db.execute(
            "SELECT state, worker FROM verif_rows WHERE job = %s AND line = %s", (self.job, line)
        ).fetchone()
        if row is not None and row[1] == self.worker:
            raise state_mismatch_error(self._where, line, expected, row[0])
        return False

    @_reported
    def mark_sending(self, line: int) -> bool:
        # A fresh lease: a 'sending' row whose lease has run out is taken for a
        # dead worker's and made 'unknown', and a worker that stalled past its
        # lease (with no one taking the row meanwhile) still owns and sends it.
        return self._mine(
            line,
            "queued",
            "state = 'sending', lease_expires = now() + %(lease)s",
            lease=self._lease,
        )

    @_reported
    def mark_sent(self, line: int, request_id: int) -> bool:
        return self._mine(
            line,
            "sending",
            "state = 'sent', request_id = %(request_id)s, sent_at = %(now)s",
            request_id=request_id,
            now=time.time(),
        )

    @_reported
    def finish(
        self, line: int, state: str, result: Mapping[str, Any], *, expected: str
    ) -> JobRow | None:
        check_final(state)
        values = self._db.execute(
            "UPDATE verif_rows SET state = %(state)s, result = %(result)s, "
            "finished_at = %(now)s, worker = NULL, lease_expires = NULL "
            "WHERE job = %(job)s AND line = %(line)s AND worker = %(me)s "
            f"AND state = %(was)s RETURNING {RECORD_COLUMNS}",
            {
                "state": state,
                "result": json.dumps(dict(result)),
                "now": time.time(),
                "job": self.job,
                "line": line,
                "me": self.worker,
                "was": expected,
            },
        ).fetchone()
        if values is None:
            self._lost(line, expected)
            return None
        return JobRow.from_record(*values)

    def finished(self) -> Iterator[JobRow]:
        # A server-side cursor: a job of a million rows is not held in memory.
        try:
            yield from self._finished()
        except psycopg.Error as exc:
            raise JournalError(f"{self._where}: {str(exc).strip()}") from exc

    def _finished(self) -> Iterator[JobRow]:
        with self._db.transaction(), self._db.cursor(name="verif_finished") as cursor:
            cursor.execute(
                f"SELECT {RECORD_COLUMNS} FROM verif_rows WHERE job = %s AND state = ANY(%s) "
                "ORDER BY line",
                (self.job, sorted(FINAL_STATES)),
            )
            for values in cursor:
                yield JobRow.from_record(*values)

    @_reported
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(ALL_STATES, 0)
        for state, count in self._db.execute(
            "SELECT state, count(*) FROM verif_rows WHERE job = %s GROUP BY state", (self.job,)
        ):
            counts[state] = count
        return counts

    def rate_limiter(self, rate: float) -> PostgresRateLimiter:
        limiter = PostgresRateLimiter(self._conninfo, self.job, rate, where=self._where)
        self._limiters.append(limiter)
        return limiter

    def close(self) -> None:
        """Hand back the rows this worker holds but has not started, then disconnect."""
        try:
            if not self._db.closed:
                self._db.execute(
                    "UPDATE verif_rows SET worker = NULL, lease_expires = NULL "
                    "WHERE job = %s AND worker = %s AND state IN ('queued', 'sent')",
                    (self.job, self.worker),
                )
        except psycopg.Error:
            pass  # the leases run out by themselves
        finally:
            self._db.close()
            for limiter in self._limiters:
                limiter.close()


class PostgresRateLimiter:
    """At most ``rate`` requests per second for all workers of a job together.

    GCRA, as :class:`~verif_client.RateLimiter`, with its one timestamp (the
    theoretical arrival time) in a row of the job: each acquisition moves it
    on by one interval in a single atomic ``UPDATE`` and learns how long to
    wait for its slot. The times are the database server's, so the workers'
    clocks do not matter, and a worker that dies holds nothing.
    """

    def __init__(
        self, conninfo: str, job: str, rate: float, *, burst: int = 1, where: str = ""
    ) -> None:
        interval, self._tolerance = gcra_parameters(rate, burst)
        self._interval = datetime.timedelta(seconds=interval)
        self.rate = rate
        self.burst = burst
        self._job = job
        self._conninfo = conninfo
        self._where = where or job
        self._db: psycopg.Connection[TupleRow] | None = None
        self._thread: anyio.CapacityLimiter | None = None

    def __repr__(self) -> str:
        return f"PostgresRateLimiter(job={self._job!r}, rate={self.rate}, burst={self.burst})"

    def reserve(self) -> float:
        """Claim the next slot of the job; return how long to wait for it."""
        if self._db is None:
            self._db = _connect(self._conninfo, self._where)
        row = self._db.execute(
            "WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now) "
            "UPDATE verif_job_rates SET tat = greatest(tat, clock.now) + %(interval)s "
            "FROM clock WHERE job = %(job)s "
            "RETURNING extract(epoch FROM tat - clock.now - %(interval)s)::float8",
            {"interval": self._interval, "job": self._job},
        ).fetchone()
        if row is None:
            raise JournalError(f"{self._where}: the job has been deleted")
        return max(0.0, float(row[0]) - self._tolerance)

    async def acquire(self) -> None:
        # One thread: the connection serves one statement at a time anyway.
        if self._thread is None:
            self._thread = anyio.CapacityLimiter(1)
        wait = await anyio.to_thread.run_sync(self.reserve, limiter=self._thread)
        if wait > 0:
            await anyio.sleep(wait)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
