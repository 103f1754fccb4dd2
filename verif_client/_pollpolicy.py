"""When to poll again and how a poll run reads answers: the light half of polling.

Kept apart from ``_polling`` (the scheduler, its tasks and streams) so that the
client, its default arguments and the hooks' events need not import the poll
machinery: a first call does not use it (docs/performance.md: start-up).
"""

from __future__ import annotations

import enum
import random
from typing import Final, Literal, get_args

import attrs

from ._results import VerificationResult
from ._retry import RetryPolicy, grown


class PollStatus(enum.Enum):
    """How the polling of one id ended."""

    VERIFIED = "verified"
    DECLINED = "declined"
    LOCATED = "located"
    TIMED_OUT = "timed_out"
    FAILED = "failed"


_NON_NEGATIVE: Final = attrs.validators.ge(0.0)
_FRACTION: Final = attrs.validators.and_(attrs.validators.ge(0.0), attrs.validators.le(1.0))

POLL_RETRY: Final = RetryPolicy(attempts=3, initial_backoff=0.5, max_backoff=2.0, deadline=15.0)

FalseMeans = Literal["auto", "pending", "final"]
"""What a ``Verified`` false means: see :class:`PollPolicy`."""


class VerifiedDialect:
    """What one service has shown of how it says "nobody answered yet".

    A service whose ``Verified`` is a nullable bool answers nil until the owner
    acts, so its false is an answer; one whose member is a plain .NET ``bool``
    answers false until then. Once a nil has been seen, the service is known
    to be of the first kind. One per client: every poll run learns from all.
    """

    __slots__ = ("nil_seen",)

    def __init__(self) -> None:
        self.nil_seen = False

    def learn(self, result: VerificationResult) -> None:
        # A plain bool cannot be nil: any nil, with a message or not, shows the shape.
        if result.verified is None:
            self.nil_seen = True


@attrs.frozen(slots=True)
class PollPolicy:
    """When to ask again, and for how long.

    The n-th poll (1-based) is made ``delay(n)`` seconds after the previous
    answer (after the start for n = 1): ``min(max_delay, initial_delay *
    multiplier**(n-1))``, shortened by a random fraction of at most ``jitter``
    (1.0 = full jitter, uniform in [0, d]; 0 = none). The default 0.5 keeps
    intervals within [d/2, d]: enough to spread a batch sent at once, while full
    jitter would halve the mean interval and so bill more polls for the same
    detection delay. Polls stop at ``timeout`` seconds after the start; the last
    delay is cut to land on the deadline. ``retry`` governs failed calls within
    one poll, an unreadable answer included.

    ``false_means`` says what a ``Verified`` false is: ``"final"`` ends the id
    as DECLINED; ``"pending"`` asks again (false may still turn true);
    ``"auto"`` (the default) reads false as pending until this client has seen
    a nil ``Verified`` from the service, and as final from then on (a service
    that says "not yet" with nil says "no" with false).
    """

    initial_delay: float = attrs.field(default=1.0, validator=_NON_NEGATIVE)
    multiplier: float = attrs.field(default=1.5, validator=_NON_NEGATIVE)
    max_delay: float = attrs.field(default=15.0, validator=_NON_NEGATIVE)
    jitter: float = attrs.field(default=0.5, validator=_FRACTION)
    timeout: float = attrs.field(default=600.0, validator=_NON_NEGATIVE)
    retry: RetryPolicy = POLL_RETRY
    false_means: FalseMeans = attrs.field(
        default="auto", validator=attrs.validators.in_(get_args(FalseMeans))
    )

    def delay(self, poll_number: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before poll ``poll_number`` (1-based), jitter applied.

        Args:
            poll_number: Which poll: 1 is the first, after the start.
            rng: The random source of the jitter (the ``random`` module's by default).
        """
        base = min(self.max_delay, grown(self.initial_delay, self.multiplier, poll_number - 1))
        return base * (1.0 - self.jitter * (rng or random).random())


DEFAULT_POLL_POLICY: Final = PollPolicy()


class _NoJitter(random.Random):
    """A random source whose draws are 0: a delay with no jitter taken off."""

    def random(self) -> float:
        return 0.0


# Here, not in _polling, which mypyc may compile: a compiled class cannot subclass random.Random.
NO_JITTER: Final = _NoJitter(0)
