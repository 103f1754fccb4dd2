"""A blocking facade for scripts and synchronous web apps.

It runs one :class:`VerificationClient` on an event loop in a background
thread (anyio's blocking portal), so connections are pooled across calls just
as in async code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Self, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from ._client import VerificationClient
from ._results import LocationResult, RequestResult, VerificationResult
from ._service import Binding

_T = TypeVar("_T")


class SyncVerificationClient:
    """The same methods as :class:`VerificationClient`, blocking.

    Takes the same arguments, plus ``backend`` (``"asyncio"`` or ``"trio"``)
    for the background loop. Use it as a context manager or call ``close()``.
    """

    def __init__(self, base_url: str, *, backend: str = "asyncio", **options: Any) -> None:
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = start_blocking_portal(
            backend
        )
        self._portal: BlockingPortal = self._portal_cm.__enter__()
        try:
            self._client = VerificationClient(base_url, **options)
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise

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
        if self._portal_cm is None:
            return
        try:
            self._portal.call(self._client.aclose)
        finally:
            cm, self._portal_cm = self._portal_cm, None
            cm.__exit__(None, None, None)

    def _run(self, func: Callable[..., Coroutine[Any, Any, _T]], *args: Any, **kw: Any) -> _T:
        if self._portal_cm is None:
            raise RuntimeError("this SyncVerificationClient is closed")
        result: _T = self._portal.call(functools.partial(func, *args, **kw))
        return result

    def send_confirmation_sms(
        self, phone_number: str, question: str, *, binding: Binding | str | None = None
    ) -> RequestResult:
        return self._run(
            self._client.send_confirmation_sms, phone_number, question, binding=binding
        )

    def has_been_verified(
        self, request_id: int, *, binding: Binding | str | None = None
    ) -> VerificationResult:
        return self._run(self._client.has_been_verified, request_id, binding=binding)

    def get_mobile_location(
        self, request_id: int, *, binding: Binding | str | None = None
    ) -> LocationResult:
        return self._run(self._client.get_mobile_location, request_id, binding=binding)

    def revoke_mobile_consent(
        self, mobile_number: str, *, binding: Binding | str | None = None
    ) -> bool:
        return self._run(self._client.revoke_mobile_consent, mobile_number, binding=binding)

    def get_mobile_consent_text(self, *, binding: Binding | str | None = None) -> str:
        return self._run(self._client.get_mobile_consent_text, binding=binding)

    def update_bad_check_reject_reason(
        self, bad_check_id: int, reject_reason: str, *, binding: Binding | str | None = None
    ) -> bool:
        return self._run(
            self._client.update_bad_check_reject_reason,
            bad_check_id,
            reject_reason,
            binding=binding,
        )

    def call(
        self, operation: str, *, binding: Binding | str | None = None, **params: Any
    ) -> object:
        return self._run(self._client.call, operation, binding=binding, **params)
