"""The SQLite journal's guarantees, without a network."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from verif_client._journal import InputRow, JournalError, SQLiteJournal


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
    journal.close()  # the process "dies" here: nothing else is written
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
        journal.finish(2, "sent", {})


def test_a_journal_from_a_newer_library_is_refused(tmp_path: Path) -> None:
    make(tmp_path).close()
    db = sqlite3.connect(tmp_path / "job.sqlite")
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(JournalError, match="upgrade"):
        SQLiteJournal(str(tmp_path / "job.sqlite"))


def test_a_file_that_is_not_a_journal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "not.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(JournalError):
        SQLiteJournal(str(path))
