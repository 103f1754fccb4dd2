"""A polled operation's requests as prebuilt bytes with the id spliced in.

A poll's request differs from the last only in its id: the request line, the
headers (the pool's, checked once) and the envelope around the id are the
same bytes every time. ``IdRequests.render(request_id)`` makes the whole
request with one bytes ``%``, where encoding it (checks, the envelope, the
request object, the head and Content-Length joined) took a dozen calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from .._codec import HTTPRequest
from .._xsd import LONG_MAX

# Two ids of the same length whose digits appear nowhere else in a request.
_MARKS: Final = (7_351_937_193_516_371_759, 7_351_937_193_516_371_758)


class IdRequests:
    """The requests of one operation whose one parameter is an id
    (xsd:long, 0 or more), for any valid id."""

    __slots__ = ("_fixed", "_format")

    def __init__(self, format_: bytes, fixed: int) -> None:
        self._format = format_  # %d: Content-Length, %s: the id's digits
        self._fixed = fixed  # the body's length but for the digits

    def __repr__(self) -> str:
        # Its bytes hold the request's credentials (a SOAP header), as the
        # codec's frames they were made from do: never shown.
        return f"<{type(self).__name__}>"

    def render(self, request_id: object) -> bytes | None:
        """The request for ``request_id``; None for anything but a plain int in
        range (a bool, a subclass, a negative id), which the caller encodes as
        ever, with its checks and errors."""
        if type(request_id) is not int or not 0 <= request_id <= LONG_MAX:
            return None
        digits = b"%d" % request_id
        return self._format % (self._fixed + len(digits), digits)


def id_requests(
    encode: Callable[[int], HTTPRequest], head: Callable[[HTTPRequest], bytes]
) -> IdRequests | None:
    """The template of ``encode``'s requests (an id's request), or None if its
    id is not spliceable: a POST whose body holds the id's digits once, as
    they are, and nothing else that depends on it. ``head`` gives a
    request's line and headers as the pool writes them (without
    Content-Length)."""
    first, second = (encode(mark) for mark in _MARKS)
    marks = [str(mark).encode("ascii") for mark in _MARKS]
    if (
        first.method != "POST"
        or (first.method, first.path, first.headers) != (second.method, second.path, second.headers)
        or first.body.count(marks[0]) != 1
        or first.body.replace(marks[0], marks[1]) != second.body
    ):
        return None
    before, after = first.body.split(marks[0])
    top = head(first)
    if marks[0] in top:
        return None
    format_ = b"%sContent-Length: %%d\r\n\r\n%s%%s%s" % (
        top.replace(b"%", b"%%"),
        before.replace(b"%", b"%%"),
        after.replace(b"%", b"%%"),
    )
    return IdRequests(format_, len(before) + len(after))
