"""A blocking facade for scripts and synchronous web apps.

It runs one :class:`VerificationClient` on an event loop in a background
thread (anyio's blocking portal), so connections are pooled across calls just
as in async code.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Self, TypeVar, Unpack, overload

import anyio
import anyio.to_thread
from anyio.from_thread import BlockingPortal

from ._client import VerificationClient
from ._codec import Codec
from ._operations import Operation
from ._polling import LocationOutcome, Outcome, PollOptions, PollStream, VerificationOutcome
from ._pollpolicy import DEFAULT_POLL_POLICY, PollPolicy
from ._results import LocationResult, RequestResult, VerificationResult
from ._retry import RetryPolicy
from ._service import Binding

_T = TypeVar("_T")
R = TypeVar("R")
_O = TypeVar("_O", bound=Outcome)


class SyncVerificationClient:
    """Every method of :class:`VerificationClient`, blocking.

    Takes the same arguments, plus ``backend`` (``"asyncio"`` or ``"trio"``)
    for the background loop. Use it as a context manager or call ``close()``.
    The ``poll_*`` methods return plain iterators of outcomes (leaving the
    loop early stops the run); ``call_with``'s ``before_send`` is a plain
    function, run in a worker thread.
    """

    def __init__(self, base_url: str, *, backend: str = "asyncio", **options: Any) -> None:
        self._loop: _LoopThread | None = _LoopThread(backend)
        self._portal = self._loop.portal
        try:
            self._client = VerificationClient(base_url, **options)
        except BaseException:
            self._loop.stop()
            raise
        _OPEN.add(self)

    def __repr__(self) -> str:
        return f"<Sync{repr(self._client)[1:]}"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the client and its background event loop; the ``with`` block
        does it on leaving. Closing twice is harmless.
        """
        if self._loop is None:
            return
        _OPEN.discard(self)
        try:
            self._portal.call(self._client.aclose)
        finally:
            loop, self._loop = self._loop, None
            loop.stop()

    def codec(self, binding: Binding | str | None = None) -> Codec:
        """The sans-IO codec this client sends with (see :meth:`VerificationClient.codec`)."""
        return self._client.codec(binding)

    def _open_portal(self) -> BlockingPortal:
        if self._loop is None:
            raise RuntimeError("this SyncVerificationClient is closed")
        return self._portal

    def _run(self, func: Callable[..., Coroutine[Any, Any, _T]], *args: Any, **kw: Any) -> _T:
        result: _T = self._open_portal().call(functools.partial(func, *args, **kw))
        return result

    # -- the six operations --------------------------------------------------

    def send_confirmation_sms(
        self, phone_number: str, question: str, *, binding: Binding | str | None = None
    ) -> RequestResult:
        """Blocking ``VerificationClient.send_confirmation_sms``: the same
        parameters, result and errors.
        """
        return self._run(
            self._client.send_confirmation_sms, phone_number, question, binding=binding
        )

    def has_been_verified(
        self, request_id: int, *, binding: Binding | str | None = None
    ) -> VerificationResult:
        """Blocking ``VerificationClient.has_been_verified``."""
        return self._run(self._client.has_been_verified, request_id, binding=binding)

    def get_mobile_location(
        self, request_id: int, *, binding: Binding | str | None = None
    ) -> LocationResult:
        """Blocking ``VerificationClient.get_mobile_location``."""
        return self._run(self._client.get_mobile_location, request_id, binding=binding)

    def revoke_mobile_consent(
        self, mobile_number: str, *, binding: Binding | str | None = None
    ) -> bool:
        """Blocking ``VerificationClient.revoke_mobile_consent``."""
        return self._run(self._client.revoke_mobile_consent, mobile_number, binding=binding)

    def get_mobile_consent_text(self, *, binding: Binding | str | None = None) -> str:
        """Blocking ``VerificationClient.get_mobile_consent_text``."""
        return self._run(self._client.get_mobile_consent_text, binding=binding)

    def update_bad_check_reject_reason(
        self, bad_check_id: int, reject_reason: str, *, binding: Binding | str | None = None
    ) -> bool:
        """Blocking ``VerificationClient.update_bad_check_reject_reason``."""
        return self._run(
            self._client.update_bad_check_reject_reason,
            bad_check_id,
            reject_reason,
            binding=binding,
        )

    @overload
    def call(
        self, operation: Operation[R], *, binding: Binding | str | None = None, **params: Any
    ) -> R: ...
    @overload
    def call(
        self, operation: str, *, binding: Binding | str | None = None, **params: Any
    ) -> object: ...
    def call(
        self,
        operation: str | Operation[Any],
        *,
        binding: Binding | str | None = None,
        **params: Any,
    ) -> object:
        """Blocking ``VerificationClient.call``: any operation, by its constant
        or its wire name, with wire-named parameters.
        """
        return self.call_with(operation, params, binding=binding)

    @overload
    def call_with(
        self,
        operation: Operation[R],
        params: Mapping[str, object],
        *,
        binding: Binding | str | None = None,
        retry: RetryPolicy | None = None,
        before_send: Callable[[], object] | None = None,
    ) -> R: ...
    @overload
    def call_with(
        self,
        operation: str,
        params: Mapping[str, object],
        *,
        binding: Binding | str | None = None,
        retry: RetryPolicy | None = None,
        before_send: Callable[[], object] | None = None,
    ) -> object: ...
    def call_with(
        self,
        operation: str | Operation[Any],
        params: Mapping[str, object],
        *,
        binding: Binding | str | None = None,
        retry: RetryPolicy | None = None,
        before_send: Callable[[], object] | None = None,
    ) -> object:
        """Blocking ``VerificationClient.call_with``; ``before_send`` is a
        plain function, run in a worker thread.
        """
        hook = None
        if before_send is not None:
            blocking_hook = before_send

            async def hook() -> None:
                # The caller's own blocking code: off the loop, which other calls share.
                await anyio.to_thread.run_sync(blocking_hook)

        return self._run(
            self._client.call_with,
            operation,
            params,
            binding=binding,
            retry=retry,
            before_send=hook,
        )

    # -- polling -------------------------------------------------------------

    def wait_until_verified(
        self, request_id: int, *, policy: PollPolicy = DEFAULT_POLL_POLICY
    ) -> VerificationOutcome:
        """Blocking ``VerificationClient.wait_until_verified``: poll one id
        until it settles and return its outcome.
        """
        return self._run(self._client.wait_until_verified, request_id, policy=policy)

    def wait_for_location(
        self, request_id: int, *, policy: PollPolicy = DEFAULT_POLL_POLICY
    ) -> LocationOutcome:
        """Blocking ``VerificationClient.wait_for_location``."""
        return self._run(self._client.wait_for_location, request_id, policy=policy)

    def poll_verifications(
        self, request_ids: Iterable[int] = (), **options: Unpack[PollOptions]
    ) -> Iterator[VerificationOutcome]:
        """Outcomes as they settle, like the async ``poll_verifications``
        (without ``keep_open``: the ids are all given up front)."""
        return self._iterate(self._client.poll_verifications(request_ids, **options))

    def poll_locations(
        self, request_ids: Iterable[int] = (), **options: Unpack[PollOptions]
    ) -> Iterator[LocationOutcome]:
        """Outcomes as they settle, like the async ``poll_locations``
        (the ids all given up front).
        """
        return self._iterate(self._client.poll_locations(request_ids, **options))

    def poll_verifications_and_locations(
        self, request_ids: Iterable[int] = (), **options: Unpack[PollOptions]
    ) -> Iterator[Outcome]:
        """Both outcomes per id as they settle, like the async
        ``poll_verifications_and_locations`` (the ids all given up front).
        """
        return self._iterate(self._client.poll_verifications_and_locations(request_ids, **options))

    def _iterate(self, run: AbstractAsyncContextManager[PollStream[_O]]) -> Iterator[_O]:
        portal = self._open_portal()
        # The run's task group lives on the loop thread; leaving the loop (or
        # the iterator being closed) ends it there, like leaving ``async with``.
        context = portal.wrap_async_context_manager(run)
        outcomes = context.__enter__().__aiter__()
        try:
            while True:
                try:
                    outcome = portal.call(outcomes.__anext__)
                except StopAsyncIteration:
                    return
                yield outcome
        finally:
            if self._loop is not None:  # closed already: the run ended with its loop
                context.__exit__(None, None, None)


class _LoopThread:
    """The event loop a SyncVerificationClient runs on, in a daemon thread.

    Not ``anyio.from_thread.start_blocking_portal``: a client never closed
    leaves that context manager to be finalized at interpreter exit, when
    it calls into a loop thread that can no longer run, and the process
    hangs for ever. A daemon thread never holds the exit up, and the
    ``atexit`` hook below closes what was left open while it still runs.
    """

    def __init__(self, backend: str) -> None:
        started: Future[BlockingPortal] = Future()

        async def serve() -> None:
            async with BlockingPortal() as portal:
                started.set_result(portal)
                await portal.sleep_until_stopped()

        def run() -> None:
            try:
                anyio.run(serve, backend=backend)
            except BaseException as exc:
                if not started.done():
                    started.set_exception(exc)

        self._thread = threading.Thread(target=run, name="verif_client-sync", daemon=True)
        self._thread.start()
        self.portal = started.result()

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has already ended
            self.portal.call(self.portal.stop, True)
        self._thread.join()


_OPEN: weakref.WeakSet[SyncVerificationClient] = weakref.WeakSet()


@atexit.register
def _close_left_open() -> None:
    """Close the clients a program never closed (also when it ended with an
    exception): atexit runs while daemon threads still do."""
    for client in list(_OPEN):
        with contextlib.suppress(Exception):
            client.close()
