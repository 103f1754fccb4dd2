"""The verif-client command: call, bulk status, and its one-line errors."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from verif_client import _cli as cli
from verif_client._cli import main, parse_duration
from verif_client.simulator import Simulator, serve_in_thread

USER, PASSWORD = "cli-user", "cli-Pa55word"


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[Simulator]:
    simulator = Simulator(credentials=(USER, PASSWORD))
    with serve_in_thread(simulator) as server:
        monkeypatch.setenv("VERIF_BASE_URL", server.base_url)
        monkeypatch.setenv("VERIF_API_USERNAME", USER)
        monkeypatch.setenv("VERIF_API_PASSWORD", PASSWORD)
        yield simulator


@pytest.mark.parametrize("binding", ["soap11", "soap12", "http-get", "http-post"])
def test_call_prints_the_typed_result_as_json(
    service: Simulator, binding: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "call",
                "SecureLink_Confirmation_SendRequestViaSms",
                "PhoneNumber=5551234567",
                "ConfirmationQuestion=Did you ask to pay?",
                "--binding",
                binding,
            ]
        )
        == 0
    )
    sent = json.loads(capsys.readouterr().out)
    assert sent["request_id"] > 2**32
    assert (
        main(
            [
                "call",
                "SecureLink_SecurityCode_HasBeenVerified",
                f"RequestId={sent['request_id']}",
                "--binding",
                binding,
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out) == {"verified": None, "error_message": None}
    assert main(["call", "GetMobileConsentText", "--binding", binding]) == 0
    assert json.loads(capsys.readouterr().out) == service.consent_text


def test_call_takes_a_wire_name_in_any_case_and_sends_the_contracts_spelling(
    service: Simulator, capsys: pytest.CaptureFixture[str]
) -> None:
    # GET/POST operation names are case sensitive at the service (as ASMX):
    # an answer proves the canonical name went out.
    assert main(["call", "getmobileconsenttext", "--binding", "http-get"]) == 0
    assert json.loads(capsys.readouterr().out) == service.consent_text
    assert [r.operation for r in service.requests] == ["GetMobileConsentText"]


def test_call_escapes_control_characters_from_the_service_in_its_json(
    service: Simulator, capsys: pytest.CaptureFixture[str]
) -> None:
    # XML cannot carry ESC itself; its C1 twin (CSI) and a bidi override it can.
    service.consent_text = "ok\x9b2J\u202eevil"
    assert main(["call", "GetMobileConsentText", "--binding", "http-post"]) == 0
    out = capsys.readouterr().out
    assert "\x9b" not in out
    assert "\u202e" not in out
    assert "\\u009b" in out
    assert json.loads(out) == service.consent_text


def test_errors_are_one_line_with_a_non_zero_exit(
    service: Simulator, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = [
        (["call", "SecureLink_SecurityCode_HasBeenVerified", "RequestId=abc"], 2, "xsd:long"),
        (["call", "SecureLink_SecurityCode_HasBeenVerified", "Id=1"], 2, "RequestId=..."),
        (["call", "NoSuchOperation"], 2, "unknown operation"),
        (
            [
                "call",
                "SecureLink_Confirmation_SendRequestViaSms",
                "PhoneNumber=12",
                "ConfirmationQuestion=Pay?",
            ],
            2,
            "PhoneNumber",
        ),
    ]
    for argv, status, text in cases:
        assert main(argv) == status
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert text in err
        assert PASSWORD not in err
    monkeypatch.setenv("VERIF_API_PASSWORD", "wrong")
    assert main(["call", "GetMobileConsentText"]) == 1
    assert "AuthenticationError" in capsys.readouterr().err


def test_soap_without_a_password_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VERIF_API_PASSWORD", raising=False)
    assert (
        main(
            ["call", "GetMobileConsentText", "--base-url", "http://127.0.0.1:9", "--username", "u"]
        )
        == 2
    )
    assert "VERIF_API_PASSWORD" in capsys.readouterr().err


def test_bulk_status_counts_a_journal(
    service: Simulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    numbers = tmp_path / "numbers.csv"
    numbers.write_text("phone_number,id\n5551234567,a\n555-1,b\n")
    journal, output = tmp_path / "job.sqlite", tmp_path / "out.jsonl"
    assert (
        main(
            [
                "bulk",
                "run",
                "--input",
                str(numbers),
                "--question",
                "Pay?",
                "--journal",
                str(journal),
                "--output",
                str(output),
                "--deadline",
                "20",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert sorted((row["id"], row["status"]) for row in rows) == [
        ("a", "verified"),
        ("b", "invalid"),
    ]
    capsys.readouterr()
    assert main(["bulk", "status", "--journal", str(journal)]) == 0
    status = capsys.readouterr().out
    assert "verified" in status
    assert "total" in status


@pytest.mark.parametrize(
    ("text", "seconds"), [("60", 60), ("90s", 90), ("10m", 600), ("1h", 3600), ("1.5m", 90)]
)
def test_durations_take_seconds_or_a_unit(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_a_bad_duration_is_refused() -> None:
    with pytest.raises(SystemExit):
        main(["bulk", "run", "--journal", "j", "--output", "o", "--deadline", "soon"])


def test_a_bug_of_ours_is_one_line_and_exit_70_with_the_traceback_under_verbose(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No input reaches a bug on purpose: one is planted where every command passes.
    def planted(args: object) -> int:
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(cli, "_dispatch", planted)
    assert main(["call", "GetMobileConsentText"]) == 70
    err = capsys.readouterr().err
    assert err == "verif-client: internal error: ZeroDivisionError: planted (-v shows more)\n"
    library = logging.getLogger("verif_client")
    level, handlers = library.level, list(library.handlers)
    try:
        assert main(["-v", "call", "GetMobileConsentText"]) == 70
    finally:
        # -v turns the library's DEBUG log on for the process: not for the tests after this one.
        library.setLevel(level)
        library.handlers[:] = handlers
    assert "Traceback" in capsys.readouterr().err
