"""Reading the bulk input: every bad row is reported with its line, good rows survive."""

from __future__ import annotations

import pytest

from verif_client._bulk import read_input
from verif_client._codec import Binding
from verif_client._journal import InputRow


def rows(
    text: str, question: str | None = "Did you ask to pay?", binding: Binding = Binding.SOAP11
) -> dict[int, InputRow]:
    return {row.line: row for row in read_input(text.encode(), question, binding)}


def test_good_rows_carry_number_question_and_user_key() -> None:
    read = rows("phone_number,question,id\n5551234567,,a1\n5551234568,Is it you?,a2\n")
    assert read[2].problem is None
    assert (read[2].phone_number, read[2].question, read[2].user_id) == (
        "5551234567",
        "Did you ask to pay?",
        "a1",
    )
    assert read[3].question == "Is it you?"


def test_each_bad_row_is_reported_with_its_line_and_reason() -> None:
    text = (
        "phone_number,question,id\n"
        "5551234567,,ok\n"  # 2
        "555-1234,,dash\n"  # 3
        ",,empty\n"  # 4
        "5551234567,,dup\n"  # 5
        "5551234569," + "x" * 201 + ",long\n"  # 6
        "5551234570,,a,extra\n"  # 7
        '5551234571,"unterminated\n'  # 8
    )
    read = rows(text)
    assert read[2].problem is None
    assert "PhoneNumber" in (read[3].problem or "")
    assert read[4].problem == "phone_number is empty"
    assert "duplicate" in (read[5].problem or "")
    assert "line 2" in (read[5].problem or "")
    assert "200" in (read[6].problem or "")
    assert "fields" in (read[7].problem or "")
    malformed = [row for line, row in read.items() if line >= 8]
    assert malformed
    assert all(row.problem for row in malformed)


def test_missing_phone_column_makes_every_row_invalid_but_not_the_job() -> None:
    read = rows("number,id\n5551234567,a\n5551234568,b\n")
    assert [row.problem for row in read.values()] == ["missing column phone_number"] * 2


def test_no_question_anywhere_is_a_row_problem() -> None:
    read = rows("phone_number\n5551234567\n", question=None)
    assert "no question" in (read[2].problem or "")


def test_emoji_count_two_utf16_units_toward_the_question_limit() -> None:
    ok = rows("phone_number\n5551234567\n", question="\N{GRINNING FACE}" * 100)
    too_long = rows("phone_number\n5551234567\n", question="\N{GRINNING FACE}" * 100 + "?")
    assert ok[2].problem is None
    assert too_long[2].problem is not None


def test_get_binding_refuses_what_asp_net_request_validation_would() -> None:
    soap = rows("phone_number\n5551234567\n", question="Pay <ACME>?")
    get = rows("phone_number\n5551234567\n", question="Pay <ACME>?", binding=Binding.HTTP_GET)
    assert soap[2].problem is None
    assert "SOAP" in (get[2].problem or "")


def test_utf8_bom_and_blank_lines_are_tolerated() -> None:
    read = rows("\ufeffphone_number\n\n5551234567\n")
    assert [row.phone_number for row in read.values() if row.problem is None] == ["5551234567"]


@pytest.mark.parametrize("text", ["", "phone_number\n"])
def test_empty_inputs_yield_no_rows(text: str) -> None:
    assert rows(text) == {}


def test_digits_of_other_scripts_are_not_phone_digits() -> None:
    read = rows("phone_number\n\u0665\u0665\u0665\u0661\u0662\u0663\u0664\u0665\u0666\u0667\n")
    assert "ASCII digits" in (read[2].problem or "")
