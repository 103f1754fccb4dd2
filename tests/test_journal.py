"""The SQLite journal's guarantees, without a network."""

from __future__ import annotations

import fcntl
import os
import re
import socket
import sqlite3
import stat
from pathlib import Path

import pytest

from verif_client import VerifClientError
from verif_client.bulk._job import InputRow
from verif_client.bulk._journal import JournalBusyError, JournalError
from verif_client.bulk._sqlite import SQLiteJournal


def make(tmp_path: Path) -> SQLiteJournal:
    journal = SQLiteJournal(str(tmp_path / "job.sqlite"))
    journal.load(
        [
            InputRow(2, "5551234567", "Q?", "a"),
            InputRow(3, "5551234568", "Q?", "b"),
            InputRow(4, "bad", "Q?", "c", problem="PhoneNumber: must be digits"),
        ],
        "digest",
    )
    return journal


def test_invalid_rows_are_final_from_the_start(tmp_path: Path) -> None:
    journal = make(tmp_path)
    assert [row.line for row in journal.queued()] == [2, 3]
    assert [(row.line, row.state) for row in journal.finished()] == [(4, "invalid")]


def test_a_send_in_flight_at_a_crash_becomes_unknown_and_is_not_requeued(tmp_path: Path) -> None:
    journal = make(tmp_path)
    journal.mark_sending(2)
    journal._db.close()  # the process "dies" here: nothing else is written
    journal._release()
    reopened = SQLiteJournal(str(tmp_path / "job.sqlite"))
    assert reopened.recover(resend_unknown=False) == 1
    assert reopened.row(2).state == "unknown"
    assert [row.line for row in reopened.queued()] == [3]


def test_resend_unknown_queues_unknown_rows_again(tmp_path: Path) -> None:
    journal = make(tmp_path)
    journal.mark_sending(2)
    journal.recover(resend_unknown=False)
    journal.recover(resend_unknown=True)
    assert [row.line for row in journal.queued()] == [2, 3]


def test_sent_rows_are_polled_not_resent(tmp_path: Path) -> None:
    journal = make(tmp_path)
    journal.mark_sending(2)
    journal.mark_sent(2, 2**40)
    journal.recover(resend_unknown=True)
    assert [(row.line, row.request_id) for row in journal.awaiting_answer()] == [(2, 2**40)]
    assert [row.line for row in journal.queued()] == [3]


def test_finish_refuses_a_non_final_state(tmp_path: Path) -> None:
    journal = make(tmp_path)
    with pytest.raises(ValueError, match="final"):
        journal.finish(2, "sent", {}, expected="sending")


def test_a_journal_from_a_newer_library_is_refused(tmp_path: Path) -> None:
    make(tmp_path).close()
    db = sqlite3.connect(tmp_path / "job.sqlite")
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    newer = f"{tmp_path / 'job.sqlite'} has journal schema 99; this verif_client knows 1 and older"
    with pytest.raises(JournalError, match=f"^{re.escape(newer)}: upgrade verif_client$"):
        SQLiteJournal(str(tmp_path / "job.sqlite"))


def test_a_file_that_is_not_a_journal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "not.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(JournalError, match=f"^{re.escape(str(path))}: not a usable journal \\("):
        SQLiteJournal(str(path))


def test_every_state_change_is_compare_and_set(tmp_path: Path) -> None:
    journal = make(tmp_path)
    journal.mark_sending(2)
    where = re.escape(str(tmp_path / "job.sqlite"))
    with pytest.raises(JournalError, match=f"^{where}: line 2 is sending, expected queued; "):
        journal.mark_sending(2)
    with pytest.raises(JournalError, match="line 3 is queued, expected sending"):
        journal.mark_sent(3, 2**40)
    with pytest.raises(JournalError, match="line 2 is sending, expected sent"):
        journal.finish(2, "verified", {}, expected="sent")
    journal.finish(2, "unknown", {"reason": "timeout"}, expected="sending")
    # A finished row is never overwritten, whatever the caller believes.
    with pytest.raises(JournalError, match="line 2 is unknown"):
        journal.finish(2, "failed", {}, expected="sending")
    assert journal.row(2).state == "unknown"
    assert journal.row(2).result == {"reason": "timeout"}


def test_journal_errors_are_the_librarys_errors() -> None:
    assert issubclass(JournalError, VerifClientError)


def test_a_second_owner_is_refused_with_the_first_ones_name(tmp_path: Path) -> None:
    first = make(tmp_path)
    with pytest.raises(JournalBusyError) as caught:
        SQLiteJournal(str(tmp_path / "job.sqlite"))
    owner = f"pid {os.getpid()} on {re.escape(socket.gethostname())}"
    assert re.fullmatch(
        f"{re.escape(str(tmp_path / 'job.sqlite'))}: in use by {owner} since "
        r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00; one process works a journal at a time",
        str(caught.value),
    )
    # A reader beside the owner is fine (bulk status).
    reader = SQLiteJournal(str(tmp_path / "job.sqlite"), create=False, own=False)
    assert reader.counts()["queued"] == 2
    reader.close()
    first.close()
    SQLiteJournal(str(tmp_path / "job.sqlite")).close()


def test_a_storage_failure_is_a_journal_error(tmp_path: Path) -> None:
    journal = make(tmp_path)
    journal._db.execute("PRAGMA max_page_count = 1")  # as good as a full disk
    with pytest.raises(JournalError, match=r"job\.sqlite: database or disk is full"):
        journal.load([InputRow(n, "5551234567", "Q?" * 100, "x") for n in range(10, 500)], "d")


def test_a_process_that_holds_the_lock_but_has_not_said_who_it_is_is_still_starting(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "job.sqlite")
    make(tmp_path).close()  # the last owner leaves no name behind
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new owner, not yet written
        with pytest.raises(JournalBusyError, match="in use by a process that is still starting;"):
            SQLiteJournal(path)
    finally:
        os.close(fd)


def test_a_new_journal_is_a_plain_file_under_the_umask(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    os.umask(umask)
    SQLiteJournal(str(tmp_path / "job.sqlite")).close()
    assert stat.S_IMODE(os.stat(tmp_path / "job.sqlite").st_mode) == 0o666 & ~umask


@pytest.mark.parametrize(
    ("make_file", "problem"),
    [
        (None, "no such journal"),
        (b"", "not a verif-client journal (no rows were ever loaded)"),
        (
            "CREATE TABLE accounts (id INTEGER)",
            "not a verif-client journal (a SQLite database with other tables); "
            "name a journal, or a new file for a new job",
        ),
    ],
    ids=["missing", "empty", "another-database"],
)
def test_status_and_export_name_what_they_were_given(
    tmp_path: Path, make_file: bytes | str | None, problem: str
) -> None:
    path = tmp_path / "job.sqlite"
    if isinstance(make_file, bytes):
        path.write_bytes(make_file)
    elif make_file is not None:
        with sqlite3.connect(path) as db:
            db.execute(make_file)
        db.close()
    with pytest.raises(JournalError, match=f"^{re.escape(f'{path}: {problem}')}$"):
        SQLiteJournal(str(path), create=False, own=False)


def test_a_journal_in_a_folder_that_does_not_exist_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "job.sqlite"
    with pytest.raises(JournalError, match=f"^{re.escape(str(path))}: cannot open the journal"):
        SQLiteJournal(str(path))


def test_a_reader_cannot_write(tmp_path: Path) -> None:
    make(tmp_path).close()
    reader = SQLiteJournal(str(tmp_path / "job.sqlite"), create=False, own=False)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader._db.execute("UPDATE rows SET state = 'queued'")
    reader.close()


def test_a_journal_broken_under_an_export_is_named(tmp_path: Path) -> None:
    journal = make(tmp_path)
    with sqlite3.connect(tmp_path / "job.sqlite") as db:
        db.execute("ALTER TABLE rows RENAME TO gone")
    db.close()
    where = re.escape(str(tmp_path / "job.sqlite"))
    with pytest.raises(JournalError, match=f"^{where}: no such table: rows$"):
        list(journal.finished())


def test_a_refused_row_stays_failed_unless_resending_failed_rows_is_asked(tmp_path: Path) -> None:
    journal = make(tmp_path)
    journal.mark_sending(2)
    journal.finish(2, "failed", {"reason": "refused"}, expected="sending")
    journal.recover(resend_unknown=True)
    assert journal.row(2).state == "failed"
    assert journal.row(3).line == 3
    journal.recover(resend_unknown=False, resend_failed=True)
    assert [row.line for row in journal.queued()] == [2, 3]
