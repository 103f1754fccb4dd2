"""A bulk job's input: a CSV of phone numbers, checked whole before a job exists.

Rows are checked with the codec that will send them; a bad row is kept with
its problem (it becomes an ``invalid`` row), a bad file is refused at once.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import itertools
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from .._bindings import codec_for
from .._codec import Codec
from .._errors import RequestValidationError, VerifClientError
from .._operations import SEND_CONFIRMATION_SMS
from .._service import Binding
from .._terminal import safe
from ._job import BulkOptions, InputRow
from ._journal import Journal, JournalError, different_input_error

_SEND: Final = SEND_CONFIRMATION_SMS


class BulkInputError(VerifClientError, ValueError):
    """The input cannot make a job (the message says where and why).

    Raised before anything is created: no journal, no output.
    """


_UNDECODED: Final = re.compile("[\udc80-\udcff]")


def _decode(data: bytes, encoding: str | None, name: str) -> str:
    """The input's text. UTF-8 (with or without a BOM) unless told otherwise;
    under a forced encoding, bytes that do not decode are kept as surrogates
    for their rows to be reported invalid."""
    if encoding is None:
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
            raise BulkInputError(
                f"{name}: line {line}, byte {column} (0x{data[exc.start]:02x}) is not UTF-8; "
                "give the file's encoding with --encoding (Excel's CSV is often cp1252)"
            ) from None
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise BulkInputError(f"--encoding {safe(encoding)!r}: no such encoding") from None
    if encoding.replace("_", "-").lower() in ("utf-8", "utf8"):
        encoding = "utf-8-sig"
    return data.decode(encoding, errors="surrogateescape")


def _undecoded(fields: list[str], encoding: str | None) -> str | None:
    for field in fields:
        found = _UNDECODED.search(field)
        if found:
            byte = ord(found.group()) - 0xDC00
            return f"byte 0x{byte:02x} does not decode as {encoding}"
    return None


def _clean(text: str | None) -> str | None:
    # A field that did not decode is stored for the record with U+FFFD in its
    # undecodable bytes' place (the journal holds only valid text).
    return None if text is None else _UNDECODED.sub("\ufffd", text)


def read_input(
    data: bytes,
    default_question: str | None,
    codec: Codec | Binding = Binding.SOAP11,
    *,
    encoding: str | None = None,
    name: str = "input",
) -> Iterator[InputRow]:
    """Check the input as a whole, then read it row by row.

    The file as a whole (its encoding, its header, a question for its rows,
    at least one row) is checked now, raising :class:`BulkInputError`; a bad
    row is then reported in its :class:`InputRow`, never fatal. Rows are
    checked with the codec that will send them (pass the client's, see
    :meth:`VerificationClient.codec`), so what is refused here is what the
    service (or ASP.NET) would refuse.
    """
    if isinstance(codec, Binding):
        codec = codec_for(codec)
    text = _decode(data, encoding, name)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = [name.strip().lower() for name in next(reader)]
    except StopIteration:
        raise BulkInputError(f"{name}: empty; expected a header line naming phone_number") from None
    except csv.Error as exc:
        raise BulkInputError(f"{name}: line 1: malformed CSV header ({exc})") from None
    columns = {column: index for index, column in enumerate(header)}
    if _undecoded(header, encoding):
        raise BulkInputError(f"{name}: line 1: the header {_undecoded(header, encoding)}")
    if "phone_number" not in columns:
        found = safe(",".join(header))
        hint = "; the file must be comma-separated" if ";" in found or "\t" in found else ""
        raise BulkInputError(
            f"{name}: line 1: the header has no phone_number column (found {found!r}){hint}"
        )
    if "question" not in columns and not default_question:
        raise BulkInputError(f"{name}: no question: give --question or a question column")
    rows = _rows(reader, codec, header, columns, default_question, encoding)
    first = next(rows, None)
    if first is None:
        raise BulkInputError(f"{name}: no rows after the header")
    return itertools.chain((first,), rows)


def _rows(
    reader: Any,
    codec: Codec,
    header: list[str],
    columns: Mapping[str, int],
    default_question: str | None,
    encoding: str | None,
) -> Iterator[InputRow]:
    seen: dict[str, int] = {}
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield InputRow(reader.line_num, None, None, None, f"malformed CSV line: {exc}")
            continue
        line = reader.line_num
        if not any(field.strip() for field in fields):
            continue

        def column(name: str, fields: list[str] = fields) -> str | None:
            index = columns.get(name)
            return fields[index].strip() if index is not None and index < len(fields) else None

        phone, user_id = column("phone_number"), column("id")
        question = column("question") or default_question
        problem = _undecoded(fields, encoding) or _row_problem(
            codec, fields, header, phone, question, seen
        )
        if problem is None and phone is not None:
            seen[phone] = line
        yield InputRow(line, _clean(phone), _clean(question), _clean(user_id), problem)


def _row_problem(
    codec: Codec,
    fields: list[str],
    header: list[str],
    phone: str | None,
    question: str | None,
    seen: Mapping[str, int],
) -> str | None:
    if len(fields) > len(header):
        return f"has {len(fields)} fields, the header has {len(header)}"
    if not phone:
        return "phone_number is empty"
    if not question:
        return "no question: give a question column or --question"
    try:
        codec.wire_texts(_SEND, _SEND.wire_params(phone, question))
    except RequestValidationError as exc:
        return str(exc)
    if phone in seen:
        return f"duplicate phone_number (first on line {seen[phone]})"
    return None


def digest(data: bytes, encoding: str | None = None) -> str:
    """The input's identity: its bytes, and the encoding they are read in if forced."""
    identity = data if encoding is None else data + b"\0encoding=" + encoding.encode()
    return hashlib.sha256(identity).hexdigest()


def question_digest(question: str | None) -> str:
    """What the job asks rows without a question of their own (a digest: it is
    recorded where the rows' numbers may not be, e.g. a Temporal memo)."""
    text = "\0none" if question is None else question
    return hashlib.sha256(b"verif-client question\0" + text.encode()).hexdigest()[:32]


def different_question_error() -> JournalError:
    return JournalError(
        "this job was loaded with another --question; give the job's own question "
        "(or none, to join without --input) or use a new --journal"
    )


_QUESTION_MARK = " question="


def load_input(
    journal: Journal,
    data: bytes,
    options: BulkOptions,
    codec: Codec | Binding,
    *,
    name: str = "input",
) -> None:
    """Load the input once; a rerun (or another worker) must name the same input, or none."""
    known = journal.input_digest()
    identity = digest(data, options.encoding)
    asked = question_digest(options.question)
    if known is None:
        rows = read_input(data, options.question, codec, encoding=options.encoding, name=name)
        # The question is part of what the job is: a rerun asking another is refused.
        journal.load(rows, identity + _QUESTION_MARK + asked)
        return
    known_input, _, known_question = known.partition(_QUESTION_MARK)
    if known_input != identity:
        raise different_input_error()
    # A journal loaded before the question was recorded has none to compare.
    if known_question and known_question != asked:
        raise different_question_error()
