"""Text on its way to a terminal: made safe to print, and measured.

Whatever the service or an input file says may reach the operator's terminal
(in an error, a progress line, a printed result). A terminal obeys control
characters: ESC and CSI sequences can retitle or clear it, move the cursor and
print fake lines, and bidirectional overrides reorder what is shown. So every
such character is printed as a visible escape (``\\x1b``, ``\\u202e``) instead.
"""

from __future__ import annotations

import os
import re
import unicodedata
from typing import Final, TextIO

# C0 and C1 controls, DEL, and the bidirectional embeddings/overrides/isolates.
_UNSAFE: Final = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str) -> str:
    """``text`` with every control character shown as an escape: one line, inert."""
    return _UNSAFE.sub(_escape, text)


def width(text: str) -> int:
    """Columns ``text`` takes on a terminal (East Asian wide characters take two)."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


# What JSON leaves as is but a terminal obeys: DEL, C1 controls, bidi controls.
_UNSAFE_IN_JSON: Final = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe_json(text: str) -> str:
    """JSON text (C0 controls already escaped) with the rest escaped as ``\\uXXXX``: still JSON."""
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def write_or_drop(stream: TextIO, text: str) -> bool:
    """Write ``text`` and flush; False when nobody reads the stream any more.

    A pipe whose reader died (``2>&1 | tee log``, tee killed by the same
    Ctrl-C) or a closed terminal must never cost the job anything: the
    stream's descriptor is then pointed at /dev/null, so that no later write,
    nor the interpreter's flush at exit, fails on it again."""
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        _silence(stream)
        return False
    return True


def _silence(stream: TextIO) -> None:
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):
        return
    try:
        os.dup2(devnull, fd)
    except OSError:
        pass
    finally:
        os.close(devnull)
