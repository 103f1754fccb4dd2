"""What the hooks and OpenTelemetry tests share: a client on the simulator with
hooks, a front that fails the first calls, and the secrets to look for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import httpx

import verif_client as vc

USER, PASSWORD = "acme-api", "Pa55-never-show-me"
PHONE, QUESTION = "5555550123", "Did you order the blue lamp?"
SEND = "SecureLink_Confirmation_SendRequestViaSms"
VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"
FAST_RETRY = vc.RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=0.002, deadline=10)
FAST_POLL = vc.PollPolicy(
    initial_delay=0.001, max_delay=0.002, timeout=60, jitter=0, false_means="final"
)

ASGI = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]


def client_for(app: ASGI, hooks: object, **options: Any) -> vc.VerificationClient:
    return vc.VerificationClient(
        "http://simulator:8080",
        username=USER,
        password=PASSWORD,
        transport=httpx.ASGITransport(app=app),
        hooks=hooks,  # type: ignore[arg-type]
        **options,
    )


def failing_first(app: ASGI, failures: int, status: int = 503) -> ASGI:
    """``app`` behind a front that answers ``status`` to the first ``failures`` calls."""
    left = [failures]

    async def front(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and left[0] > 0:
            left[0] -= 1
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b"Service Unavailable"})
            return
        await app(scope, receive, send)

    return front
