"""Polling as :class:`VerificationClient`'s methods: one id until it
settles, or many as a stream of outcomes (the poller is ``_polling``)."""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, TypeVar, Unpack

from ._pollpolicy import DEFAULT_POLL_POLICY, PollPolicy

if TYPE_CHECKING:
    from ._polling import (
        LocationOutcome,
        Outcome,
        PollKind,
        PollRunOptions,
        PollStream,
        VerificationOutcome,
    )

_O = TypeVar("_O", bound="Outcome")
RequestIds = Iterable[int] | AsyncIterable[int]


class _PollMethods:
    """Mixed into VerificationClient: its waits and poll runs."""

    if TYPE_CHECKING:

        def _poll(
            self,
            kinds: tuple[PollKind[_O], ...],
            request_ids: RequestIds,
            *,
            policy: PollPolicy = DEFAULT_POLL_POLICY,
            max_concurrency: int = 100,
            keep_open: bool = False,
        ) -> AbstractAsyncContextManager[PollStream[_O]]: ...

    async def wait_until_verified(
        self, request_id: int, *, policy: PollPolicy = DEFAULT_POLL_POLICY
    ) -> VerificationOutcome:
        """Poll HasBeenVerified for one id until it settles.

        Args:
            request_id: The id :meth:`send_confirmation_sms` returned.
            policy: When to ask again and for how long.

        Returns:
            The outcome: ``status`` ``VERIFIED``, ``DECLINED``, ``FAILED`` or
            ``TIMED_OUT``, the last answer, the error when it failed, the
            polls made. Failures are outcomes, not exceptions.
        """
        from ._polling import VERIFICATION

        return await self._wait_one(VERIFICATION, request_id, policy)

    async def wait_for_location(
        self, request_id: int, *, policy: PollPolicy = DEFAULT_POLL_POLICY
    ) -> LocationOutcome:
        """Poll MobileLocation_GetResult for one id until it settles.

        Args:
            request_id: The id :meth:`send_confirmation_sms` returned.
            policy: When to ask again and for how long.

        Returns:
            The outcome: ``status`` ``LOCATED``, ``FAILED`` or ``TIMED_OUT``
            (a denied location looks pending, so it times out).
        """
        from ._polling import LOCATION

        return await self._wait_one(LOCATION, request_id, policy)

    async def _wait_one(self, kind: PollKind[_O], request_id: int, policy: PollPolicy) -> _O:
        async with self._poll((kind,), [request_id], policy=policy, max_concurrency=1) as outcomes:
            async for outcome in outcomes:
                return outcome
        raise AssertionError("a poll run ended without an outcome")  # pragma: no cover

    def poll_verifications(
        self, request_ids: RequestIds = (), **options: Unpack[PollRunOptions]
    ) -> AbstractAsyncContextManager[PollStream[VerificationOutcome]]:
        """Poll HasBeenVerified for many ids; ``async with`` it and iterate the
        outcomes as they settle. ``request_ids`` may be an async iterable (a
        queue): the run then lasts until it ends. Options: ``policy``
        (``PollPolicy()``), ``max_concurrency`` (100 calls in flight at most)
        and ``keep_open`` (False; True keeps the input open for ``add()`` until
        ``close_input()``). Leaving the ``async with`` early cancels every
        request in flight.

        Example:
            ```python
            async with client.poll_verifications(request_ids) as outcomes:
                async for outcome in outcomes:  # each id exactly once
                    print(outcome.request_id, outcome.status)
            ```
        """
        from ._polling import VERIFICATION

        return self._poll((VERIFICATION,), request_ids, **options)

    def poll_locations(
        self, request_ids: RequestIds = (), **options: Unpack[PollRunOptions]
    ) -> AbstractAsyncContextManager[PollStream[LocationOutcome]]:
        """Like :meth:`poll_verifications`, for MobileLocation_GetResult."""
        from ._polling import LOCATION

        return self._poll((LOCATION,), request_ids, **options)

    def poll_verifications_and_locations(
        self, request_ids: RequestIds = (), **options: Unpack[PollRunOptions]
    ) -> AbstractAsyncContextManager[PollStream[Outcome]]:
        """Watch both for the same ids: one VerificationOutcome and one
        LocationOutcome per id, each as it settles."""
        from ._polling import BOTH

        return self._poll(BOTH, request_ids, **options)
