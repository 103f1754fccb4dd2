"""When a failed call may be made again, and how long to wait before it.

The rule that matters: an operation that changes something at the service
(an SMS sent, a consent revoked, a reason updated) is repeated only when the
request provably never left this machine. Reads are repeated on any transient
failure.
"""

from __future__ import annotations

import math
import random
from typing import Final

import attrs

RETRYABLE_STATUSES: Final = frozenset({502, 503, 504})


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
    is uniform in ``[0, min(max_backoff, initial_backoff * multiplier**(n-1))]``.
    """

    attempts: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    initial_backoff: float = attrs.field(default=0.25, validator=_NON_NEGATIVE)
    multiplier: float = attrs.field(default=2.0, validator=_NON_NEGATIVE)
    max_backoff: float = attrs.field(default=4.0, validator=_NON_NEGATIVE)
    deadline: float = attrs.field(default=30.0, validator=_NON_NEGATIVE)
    statuses: frozenset[int] = RETRYABLE_STATUSES

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_backoff, grown(self.initial_backoff, self.multiplier, attempt - 1))
        return (rng or random).uniform(0.0, ceiling)


DEFAULT_RETRY: Final = RetryPolicy()
NO_RETRY: Final = RetryPolicy(attempts=1)
