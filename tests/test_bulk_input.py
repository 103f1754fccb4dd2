"""Reading the bulk input: every bad row is reported with its line, good rows survive."""

from __future__ import annotations

import pytest

from verif_client._codec import Binding
from verif_client.bulk._input import BulkInputError, read_input
from verif_client.bulk._job import InputRow


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


def test_a_header_without_phone_number_is_refused_as_a_whole() -> None:
    with pytest.raises(BulkInputError, match="line 1: the header has no phone_number column"):
        rows("number,id\n5551234567,a\n5551234568,b\n")


def test_a_semicolon_separated_file_is_refused_with_a_hint() -> None:
    with pytest.raises(BulkInputError, match="must be comma-separated"):
        rows("phone_number;id\n5551234567;a\n")


def test_no_question_anywhere_is_refused_as_a_whole() -> None:
    with pytest.raises(BulkInputError, match="no question"):
        rows("phone_number\n5551234567\n", question=None)


def test_a_question_column_with_a_blank_cell_is_a_row_problem() -> None:
    read = rows("phone_number,question\n5551234567,\n5551234568,Pay?\n", question=None)
    assert "no question" in (read[2].problem or "")
    assert read[3].problem is None


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


@pytest.mark.parametrize(
    ("text", "problem"),
    [("", "empty"), ("phone_number\n", "no rows"), ("phone_number\n\n", "no rows")],
)
def test_empty_inputs_are_refused(text: str, problem: str) -> None:
    with pytest.raises(BulkInputError, match=problem):
        rows(text)


def test_a_byte_that_is_not_utf8_is_refused_naming_line_and_byte() -> None:
    data = "phone_number,question\n5551234567,Caf\u00e9?\n".encode("cp1252")
    with pytest.raises(BulkInputError, match=r"line 2, byte 15 \(0xe9\) is not UTF-8.*--encoding"):
        list(read_input(data, None))


def test_a_forced_encoding_reads_the_file_and_undecodable_rows_become_invalid() -> None:
    data = b"phone_number,question\n5551234567,Caf\xe9?\n5551234568,Bad \x81?\n"
    read = {row.line: row for row in read_input(data, None, encoding="cp1252")}
    assert read[2].problem is None
    assert read[2].question == "Caf\u00e9?"
    assert read[3].problem == "byte 0x81 does not decode as cp1252"
    assert read[3].question == "Bad \ufffd?"


def test_an_unknown_encoding_is_refused() -> None:
    with pytest.raises(BulkInputError, match="no such encoding"):
        list(read_input(b"phone_number\n5551234567\n", "Q?", encoding="klingon"))


def test_digits_of_other_scripts_are_not_phone_digits() -> None:
    read = rows("phone_number\n\u0665\u0665\u0665\u0661\u0662\u0663\u0664\u0665\u0666\u0667\n")
    assert "ASCII digits" in (read[2].problem or "")
