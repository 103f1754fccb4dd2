"""The PostgreSQL journal's guarantees, against a real server (see conftest)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import pytest

from verif_client._journal import InputRow, JobRow, JournalError, open_journal

psycopg = pytest.importorskip("psycopg")
from verif_client._journal_pg import (  # noqa: E402  (needs psycopg)
    SCHEMA_VERSION,
    PostgresJournal,
    PostgresRateLimiter,
    parse_location,
)

ROWS = [
    InputRow(2, "5551234567", "Q?", "a"),
    InputRow(3, "5551234568", "Q?", "b"),
    InputRow(4, "bad", "Q?", "c", problem="PhoneNumber: must be digits"),
    InputRow(5, "5551234569", "Q?", "d"),
]


@pytest.fixture
def job(postgres_db: str) -> str:
    return f"{postgres_db}?job=test&lease=30"


@pytest.fixture
def workers(job: str) -> Iterator[tuple[PostgresJournal, PostgresJournal]]:
    first, second = PostgresJournal.open(job), PostgresJournal.open(job)
    first.load(ROWS, "digest")
    yield first, second
    first.close()
    second.close()


def expire_leases(location: str, worker: PostgresJournal) -> None:
    """What a dead worker leaves behind: leases no one renews any more."""
    conninfo, job, _ = parse_location(location)
    with psycopg.connect(conninfo, autocommit=True) as db:
        db.execute(
            "UPDATE verif_rows SET lease_expires = now() - interval '1 second' "
            "WHERE job = %s AND worker = %s",
            (job, worker.worker),
        )


def start_sending(worker: PostgresJournal) -> JobRow:
    """Claim the next queued row and mark its SMS in flight."""
    [row] = worker.claim(send=1, poll=0).send
    assert worker.mark_sending(row.line)
    return row


def test_open_journal_chooses_the_backend_by_location(job: str) -> None:
    journal = open_journal(job)
    assert isinstance(journal, PostgresJournal)
    assert journal.job == "test"
    assert journal.lease_seconds == 30
    journal.close()


def test_a_location_without_a_job_is_refused_without_showing_the_password() -> None:
    with pytest.raises(JournalError, match="job=") as caught:
        open_journal("postgresql://me:s3cret@127.0.0.1/db")
    assert "s3cret" not in str(caught.value)


def test_status_of_a_job_that_does_not_exist_is_refused(postgres_db: str) -> None:
    with pytest.raises(JournalError, match="no such job"):
        open_journal(f"{postgres_db}?job=nope", create=False)


def test_two_workers_never_claim_the_same_row(
    workers: tuple[PostgresJournal, PostgresJournal],
) -> None:
    first, second = workers
    a = first.claim(send=2, poll=10)
    b = second.claim(send=10, poll=10)
    assert [row.line for row in a.send] == [2, 3]
    assert [row.line for row in b.send] == [5]
    assert first.claim(send=10, poll=10).send == []
    assert first.work_elsewhere()
    assert second.work_elsewhere()


def test_the_input_is_loaded_once_and_a_different_input_refused(
    workers: tuple[PostgresJournal, PostgresJournal],
) -> None:
    _first, second = workers
    second.load(ROWS, "digest")
    assert sum(second.counts().values()) == len(ROWS)
    with pytest.raises(JournalError, match="different input"):
        second.load(ROWS, "another digest")


def test_workers_loading_at_once_load_the_input_once(job: str) -> None:
    journals = [PostgresJournal.open(job) for _ in range(4)]
    barrier = threading.Barrier(len(journals))

    def load(journal: PostgresJournal) -> None:
        barrier.wait()
        journal.load(ROWS, "digest")

    threads = [threading.Thread(target=load, args=(journal,)) for journal in journals]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert journals[0].counts()["queued"] == 3
    assert journals[0].input_digest() == "digest"
    for journal in journals:
        journal.close()


@pytest.fixture
def died_sending(
    job: str, workers: tuple[PostgresJournal, PostgresJournal]
) -> tuple[JobRow, PostgresJournal, PostgresJournal]:
    """A worker that died with the SMS of a row in flight: (row, dead, alive)."""
    dead, alive = workers
    row = start_sending(dead)
    expire_leases(job, dead)
    return row, dead, alive


def test_a_send_in_flight_when_its_worker_died_becomes_unknown_and_is_not_resent(
    died_sending: tuple[JobRow, PostgresJournal, PostgresJournal],
) -> None:
    row, dead, alive = died_sending
    claim = alive.claim(send=10, poll=10)
    assert [r.line for r in claim.send] == [3, 5]
    assert claim.poll == []
    assert alive.counts()["unknown"] == 1
    # The dead worker, should it come back, cannot record a send it no longer owns.
    assert not dead.mark_sent(row.line, 123)
    assert dead.finish(row.line, "failed", {}, expected="sending") is None


def test_resend_unknown_queues_unknown_rows_again(
    died_sending: tuple[JobRow, PostgresJournal, PostgresJournal],
) -> None:
    row, _, alive = died_sending
    assert alive.recover(resend_unknown=False) == 1
    alive.recover(resend_unknown=True)
    assert row.line in [r.line for r in alive.claim(send=10, poll=0).send]


def test_a_live_workers_send_is_left_alone(
    workers: tuple[PostgresJournal, PostgresJournal],
) -> None:
    first, second = workers
    row = start_sending(first)
    assert second.recover(resend_unknown=True) == 0
    assert first.mark_sent(row.line, 2**40)


def test_a_send_starts_with_a_full_lease(
    job: str, workers: tuple[PostgresJournal, PostgresJournal]
) -> None:
    slow, other = workers
    [row] = slow.claim(send=1, poll=0).send
    # The worker stalled past its lease, and no one took the row meanwhile: it
    # may still send, but its SMS must not look like a dead worker's at once.
    expire_leases(job, slow)
    assert slow.mark_sending(row.line)
    assert other.recover(resend_unknown=False) == 0
    other.claim(send=10, poll=10)  # a claim reaps too
    assert other.counts()["unknown"] == 0
    assert slow.mark_sent(row.line, 2**40)


def test_a_dead_workers_sent_rows_are_polled_by_another(
    job: str, workers: tuple[PostgresJournal, PostgresJournal]
) -> None:
    dead, alive = workers
    row = start_sending(dead)
    dead.mark_sent(row.line, 2**40)
    assert alive.claim(send=0, poll=10).poll == []
    expire_leases(job, dead)
    [taken] = alive.claim(send=0, poll=10).poll
    assert (taken.line, taken.request_id) == (row.line, 2**40)
    assert dead.finish(row.line, "verified", {}, expected="sent") is None
    finished = alive.finish(row.line, "verified", {"verified": True}, expected="sent")
    assert finished is not None
    assert finished.to_output()["status"] == "verified"


def test_renewed_leases_are_not_taken_over(
    job: str, workers: tuple[PostgresJournal, PostgresJournal]
) -> None:
    holder, other = workers
    holder.claim(send=10, poll=0)
    expire_leases(job, holder)
    holder.renew()
    assert other.claim(send=10, poll=10).send == []


def test_closing_hands_back_unstarted_rows(
    workers: tuple[PostgresJournal, PostgresJournal],
) -> None:
    first, second = workers
    first.claim(send=10, poll=0)
    first.close()
    assert [row.line for row in second.claim(send=10, poll=0).send] == [2, 3, 5]


def test_finished_rows_come_out_in_line_order(
    workers: tuple[PostgresJournal, PostgresJournal],
) -> None:
    first, _ = workers
    for row in first.claim(send=10, poll=0).send:
        first.mark_sending(row.line)
        first.finish(row.line, "failed", {"reason": "test"}, expected="sending")
    assert [(row.line, row.state) for row in first.finished()] == [
        (2, "failed"),
        (3, "failed"),
        (4, "invalid"),
        (5, "failed"),
    ]
    with pytest.raises(ValueError, match="final"):
        first.finish(2, "sent", {}, expected="sending")


def test_a_state_change_from_an_unexpected_state_is_refused(
    workers: tuple[PostgresJournal, PostgresJournal],
) -> None:
    first, _ = workers
    row = start_sending(first)
    with pytest.raises(JournalError, match=f"line {row.line} is sending, expected sent"):
        first.finish(row.line, "verified", {}, expected="sent")
    with pytest.raises(JournalError, match=f"line {row.line} is sending, expected queued"):
        first.mark_sending(row.line)
    finished = first.finish(row.line, "unknown", {"reason": "timeout"}, expected="sending")
    assert finished is not None
    # A finished row is no worker's: a late change is refused, never written.
    assert first.finish(row.line, "failed", {}, expected="sending") is None
    assert [r.state for r in first.finished() if r.line == row.line] == ["unknown"]


def test_a_database_from_a_newer_library_is_refused(job: str) -> None:
    PostgresJournal.open(job).close()
    conninfo, _, _ = parse_location(job)
    with psycopg.connect(conninfo, autocommit=True) as db:
        [(version,)] = db.execute(
            "SELECT value FROM verif_journal_meta WHERE key = 'schema_version'"
        ).fetchall()
        assert int(version) == SCHEMA_VERSION
        db.execute("UPDATE verif_journal_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(JournalError, match=r"schema 99.*upgrade verif_client"):
        PostgresJournal.open(job)


def test_the_rate_limit_is_shared_by_all_workers(job: str) -> None:
    PostgresJournal.open(job).close()
    conninfo, name, _ = parse_location(job)
    limiters = [PostgresRateLimiter(conninfo, name, rate=10) for _ in range(3)]
    # (clock before the call, the wait it returned, clock after the call): a
    # slot is the moment of the call plus its wait, and that moment lies
    # between the two readings, however long the machine stalls.
    calls = []
    try:
        for index in range(9):
            before = time.monotonic()
            wait = limiters[index % 3].reserve()
            calls.append((before, wait, time.monotonic()))
    finally:
        for limiter in limiters:
            limiter.close()
    assert calls[0][1] == 0
    # Consecutive slots of the one job, from three "workers": never closer
    # than 0.1 s (three limiters of their own would each allow 10/s), and
    # exactly 0.1 s apart when a call came before its slot was due.
    tick = 1e-3  # the clocks' resolution, with room to spare
    for (before0, wait0, after0), (before, wait, after) in itertools.pairwise(calls):
        assert (after + wait) - (before0 + wait0) >= 0.1 - tick
        if wait > 0:
            assert (before + wait) - (after0 + wait0) <= 0.1 + tick
