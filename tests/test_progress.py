"""The bulk progress line: honest counts, the terminal's width, an ETA bounded by the deadline."""

from __future__ import annotations

import io

import pytest

from verif_client._progress import ProgressDisplay
from verif_client._terminal import safe, safe_json
from verif_client.bulk._job import RowState
from verif_client.bulk._runner import Progress


def busy() -> Progress:
    progress = Progress(deadline=600)
    progress.states.update(
        {
            RowState.QUEUED: 123456,
            RowState.SENDING: 50,
            RowState.SENT: 40000,
            RowState.VERIFIED: 800000,
            RowState.DECLINED: 1234,
            RowState.NOT_VERIFIED: 999,
            RowState.FAILED: 12,
            RowState.UNKNOWN: 7,
            RowState.INVALID: 3,
        }
    )
    return progress


@pytest.mark.parametrize("columns", [20, 40, 60, 80, 120, 300])
def test_the_line_fits_the_terminal_shedding_the_least_useful_fields(columns: int) -> None:
    display = ProgressDisplay(io.StringIO(), live=True)
    line = display.render(busy(), display.started + 5, columns - 1)
    assert len(line) <= columns - 1
    if columns >= 40:
        assert line.startswith("802255/965761 done | queued 123456")
    if columns >= 300:
        for label in ("sending 50", "waiting 40000", "not verified 999", "unknown 7", "invalid 3"):
            assert label in line


def test_each_state_is_counted_apart() -> None:
    display = ProgressDisplay(io.StringIO(), live=False)
    line = display.render(busy(), display.started)
    # "failed" is only failed, "unknown" apart; queued, sending and waiting apart.
    assert "failed 12 |" in line
    assert "unknown 7" in line
    assert "queued 123456 | sending 50 | waiting 40000" in line


def test_the_eta_never_exceeds_the_deadline_once_everything_is_sent() -> None:
    display = ProgressDisplay(io.StringIO(), live=False)
    progress = Progress(deadline=30)
    progress.states.update({RowState.SENT: 1000, RowState.VERIFIED: 1})
    now = display.started
    progress.last_sent = now - 10
    display.render(progress, now)
    progress.states.update({RowState.SENT: -1, RowState.VERIFIED: 1})
    # One row in 2 s: the rate alone says 2,000 s; the deadline says at most 20 s.
    assert display.eta(progress, now + 2, 0.5, None) == pytest.approx(18)
    assert "ETA 18s" in display.render(progress, now + 2)


def test_without_a_terminal_it_writes_plain_lines() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream, live=False)
    display(busy())
    display.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert all("\x1b" not in line and "\r" not in line for line in lines)


def test_control_characters_are_shown_not_obeyed() -> None:
    hostile = "ok\x1b]0;title\x07\x1b[2J\r\nfake\x9b31m\u202eevil\x7f"
    assert safe(hostile) == "ok\\x1b]0;title\\x07\\x1b[2J\\x0d\\x0afake\\x9b31m\\u202eevil\\x7f"
    assert safe_json('"a\\u001b\x9b\u202e"') == '"a\\u001b\\u009b\\u202e"'
