"""When a failed call may be made again, and how long to wait before it.

The rule that matters: an operation that changes something at the service
(an SMS sent, a consent revoked, a reason updated) is repeated only when the
request provably never left this machine. Reads are repeated on any transient
failure.
"""

from __future__ import annotations

import datetime
import math
import random
import time
from collections.abc import Callable, Sequence
from typing import Final

import attrs

# 429 is the service refusing the request (too many): never processed, so
# retried for every operation, sends included, after its Retry-After.
RETRYABLE_STATUSES: Final = frozenset({429, 502, 503, 504})
# The statuses whose Retry-After says when to try again.
ASKS_TO_WAIT: Final = frozenset({429, 503})
# The longest Retry-After taken as it is (about 317 years): a longer one (a
# number of 400 digits is inf as a float) is this, so every sum and message
# made of it stays a finite number.
LONGEST_WAIT: Final = 1e10


def grown(initial: float, multiplier: float, steps: int) -> float:
    """``initial * multiplier**steps``, which overflows a float after enough
    steps (a request pending for thousands of polls): past that it is infinite."""
    if initial == 0:
        return 0.0
    try:
        return initial * multiplier**steps
    except OverflowError:
        return math.inf


_NON_NEGATIVE: Final = attrs.validators.ge(0.0)


@attrs.frozen(slots=True)
class RetryPolicy:
    """Bounded exponential backoff with full jitter.

    ``attempts`` counts the first try; ``deadline`` bounds the time spent on
    one call across all attempts (seconds). The wait before attempt ``n + 1``
    is uniform in ``[0, min(max_backoff, initial_backoff * multiplier**(n-1))]``,
    or exactly what a 429's or 503's ``Retry-After`` asks (when that is past
    ``deadline``, the call fails at once, the error's ``retry_after`` set).

    A 429 was refused, not processed: it is retried for every operation. A 503
    to an operation that changes something (an SMS) is retried only with
    ``retry_sends_on_503=True``: say so when your service promises that a 503
    means the request was not processed.
    """

    attempts: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    initial_backoff: float = attrs.field(default=0.25, validator=_NON_NEGATIVE)
    multiplier: float = attrs.field(default=2.0, validator=_NON_NEGATIVE)
    max_backoff: float = attrs.field(default=4.0, validator=_NON_NEGATIVE)
    deadline: float = attrs.field(default=30.0, validator=_NON_NEGATIVE)
    statuses: frozenset[int] = RETRYABLE_STATUSES
    retry_sends_on_503: bool = False

    def retries_status(self, status: int, idempotent: bool) -> bool:
        """Whether an answer with HTTP ``status`` may be tried again."""
        if status not in self.statuses:
            return False
        return idempotent or status == 429 or (status == 503 and self.retry_sends_on_503)

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_backoff, grown(self.initial_backoff, self.multiplier, attempt - 1))
        return (rng or random).uniform(0.0, ceiling)


DEFAULT_RETRY: Final = RetryPolicy()
NO_RETRY: Final = RetryPolicy(attempts=1)


def retry_after(
    headers: Sequence[tuple[str, str]], now: Callable[[], float] = time.time
) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delay-seconds or an
    HTTP date, never below 0); None when there is none or it is unreadable."""
    value = None
    for name, text in headers:
        if name.lower() == "retry-after":
            value = text.strip()
    if not value:
        return None
    # ASCII digits only: str.isdigit() also says yes to "\xb2" ("²", a header
    # byte read as latin-1), which float() refuses with a ValueError.
    if value.isascii() and value.isdigit():
        return min(float(value), LONGEST_WAIT)
    # Loaded only when a server sends a date.
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    # OverflowError: a year past a C int ("21 Oct 99999999999").
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        # asctime's form ("Sun Nov  6 08:49:37 1994"), one of the three an HTTP
        # date may take, names no zone: HTTP dates are all GMT (RFC 9110 5.6.7).
        when = when.replace(tzinfo=datetime.UTC)
    return min(max(0.0, when.timestamp() - now()), LONGEST_WAIT)
