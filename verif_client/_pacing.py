"""What a 429 ("too many requests") does to every later request of the client.

The service's 429 slows the whole client, not just the call that got it (see
_slowdown for the pace itself): on the first one, a ``Slowdown`` goes in front
of the client's rate (``Admission.rate``), and comes out again once the pace
has climbed back, so that a client never refused pays nothing for this. A
call that a 429's Retry-After holds beyond its own deadline fails at that
deadline (``hold``) rather than waiting for ever.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from ._clock import loop_clock
from ._errors import HTTPStatusError
from ._operations import Operation
from ._retry import RetryPolicy

if TYPE_CHECKING:
    from . import _hooks
    from ._admission import Admission
    from ._slowdown import Slowdown

logger = logging.getLogger("verif_client")


class Pacing:
    """The 429 slow-down of one client: installed by the first 429, lifted by the climb back."""

    __slots__ = ("_admission", "_base_url", "_hooks", "_rate_limit", "slowdown")

    def __init__(
        self,
        admission: Admission,
        base_url: str,
        rate_limit: float | None,
        hooks: _hooks.Dispatch | None,
    ) -> None:
        self._admission = admission
        self._base_url = base_url
        self._rate_limit = rate_limit
        self._hooks = hooks
        # In front of the admission's rate after a 429, until the pace has climbed back.
        self.slowdown: Slowdown | None = None

    @property
    def slowed_to(self) -> float | None:
        """Requests per second the client is held to, or None at its own pace."""
        return None if self.slowdown is None else self.slowdown.rate

    def refused(
        self,
        op: Operation[Any],
        wait: float | None,
        began: float,
        clock: Callable[[], float] | None,
    ) -> None:
        """A 429 to an attempt that began at ``began``; ``wait``: its Retry-After."""
        clock = clock or loop_clock()
        # The pace the refused attempt was part of: the calls in flight (its
        # own slot is already back) over how long it took.
        in_flight = self._admission.in_flight() + 1
        pace = in_flight / max(clock() - began, 0.001)
        slowdown = self.slowdown
        if slowdown is None:
            # Loaded by the first 429 only (docs/performance.md: start-up).
            from ._slowdown import Slowdown

            ceiling = self._rate_limit or pace
            inner = self._admission.rate
            slowdown = self.slowdown = Slowdown(inner, ceiling, clock, self._lifted)
            self._admission.rate = slowdown
        rate = slowdown.refused(pace, wait, sent_at=began)
        if rate is None:
            return  # sent at the old pace: the cut made for it holds
        # INFO, not WARNING: the progress line, hooks and metrics show it, and
        # a line of its own would break a live progress line.
        logger.info(
            "%s answered %s with 429: every request slowed to %.2f/s%s",
            self._base_url,
            op.name,
            rate,
            "" if wait is None else f", none before {wait:g} s (Retry-After)",
        )
        if self._hooks is not None:
            self._hooks.rate_changed(rate, op.name, wait)

    def _lifted(self) -> None:
        if self.slowdown is not None:
            # Back at its own pace: no cost per request from here on.
            self._admission.rate, self.slowdown = self.slowdown.inner, None
        logger.info("%s: back to the client's own pace after 429s", self._base_url)
        if self._hooks is not None:
            self._hooks.rate_changed(None, None, None)

    async def hold(
        self,
        op: Operation[Any],
        policy: RetryPolicy,
        started: float,
        clock: Callable[[], float],
    ) -> None:
        """A 429's Retry-After holds every request of this client until it has
        passed (see _slowdown). A call waits that out only while its deadline
        allows; a hold that ends later (a Retry-After of 999999999) would make
        it a call that never ends: it then fails at its deadline, not sent,
        with the 429 that holds it (a bulk job sends the row again, a poll run
        asks again later, as after any 429)."""
        slowdown = self.slowdown
        assert slowdown is not None
        end = started + policy.deadline
        if slowdown.resume_at <= end:
            return
        await anyio.sleep(max(0.0, end - clock()))
        error = HTTPStatusError(429, "", operation=op.name)
        error.retry_after = max(0.0, slowdown.resume_at - clock())
        error.message += (
            f": not sent: the service asked (429, Retry-After) that nothing be sent for "
            f"{error.retry_after:g} s more, past the call's retry deadline of {policy.deadline:g} s"
        )
        error.args = (error.message,)
        raise error
