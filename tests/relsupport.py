"""Shared pieces of the reliability tests: hostile peers, counters of tasks and sockets."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import pytest
import sniffio
from anyio.from_thread import BlockingPortal, start_blocking_portal

import verif_client as vc
from verif_client._transport import _pool as _transport_pool
from verif_client.simulator import Simulator, serve

# One valid call of every operation, by wire name.
ARGS: dict[str, dict[str, object]] = {
    "SecureLink_Confirmation_SendRequestViaSms": {
        "PhoneNumber": "5125550100",
        "ConfirmationQuestion": "Is this you?",
    },
    "SecureLink_SecurityCode_HasBeenVerified": {"RequestId": 4294967297},
    "SecureLink_MobileLocation_GetResult": {"RequestId": 4294967297},
    "UpdatePrivateBadCheckRejectReason": {"BadCheckId": 1002, "CheckRejectReason": "NSF"},
    "RevokeMobileConsent": {"MobileNumber": "5125550100"},
    "GetMobileConsentText": {},
}

USER, PASSWORD = "acme-rel", "Rel-Pa55-6f1d0c-never-show"

# The connection layer reaches into the event loop's transports: its tests run
# on uvloop too, the loop many asyncio services use (a test module overrides
# ``anyio_backend`` with these).
# The build of hatch_build.py (`nox -s compiled`): the pool's modules are mypyc's
# extension modules, whose calls to their own functions and methods go straight to
# them, past any patch. A test that must patch one of those to make its race happen
# runs on the pure-Python modules only.
COMPILED = not (_transport_pool.__file__ or "").endswith(".py")
PATCHES_THE_POOL = pytest.mark.skipif(
    COMPILED, reason="patches a function the compiled pool calls directly"
)
UVLOOP = pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop")
WITH_UVLOOP = ["asyncio", UVLOOP, "trio"]
FAST_RETRY = vc.RetryPolicy(attempts=8, initial_backoff=0.001, max_backoff=0.004, deadline=10)
ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
SEND = "SecureLink_Confirmation_SendRequestViaSms"
E = TypeVar("E", bound=BaseException)


async def read_body(receive: Any) -> bytes:
    """The whole body of an ASGI request."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def drain(receive: Any) -> None:
    while (await receive()).get("more_body"):
        pass


def request_id_rewritten(app: ASGIApp, asks: bytes, request_id: int) -> ASGIApp:
    """``app``, but the answer to a request whose body contains ``asks`` carries
    ``request_id`` as its SecureLinkRequestId (a service that gives ids wrongly)."""

    async def rewritten(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        body = await read_body(receive)

        async def again() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def rewrite(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body" and asks in body:
                given = b"<SecureLinkRequestId>%d<" % request_id
                message = {
                    **message,
                    "body": re.sub(rb"<SecureLinkRequestId>\d+<", given, message["body"]),
                }
            await send(message)

        return await app(scope, again, rewrite)

    return rewritten


def fixed(status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> ASGIApp:
    """A peer that answers every request with these bytes."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await drain(receive)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def task_count() -> int:
    """Tasks alive in the running event loop."""
    if sniffio.current_async_library() == "trio":
        import trio

        def count(task: Any) -> int:
            return 1 + sum(count(t) for n in task.child_nurseries for t in n.child_tasks)

        return count(trio.lowlevel.current_root_task())
    import asyncio

    return len(asyncio.all_tasks())


def client_sockets_to(port: int) -> int:
    """Open TCP sockets of this process whose peer is ``port`` on loopback."""
    inodes = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    # A set, not a count: the kernel writes these tables a page at a time, and a
    # socket that others open or close meanwhile can shift one onto the next
    # page twice (seen on a loaded machine as 50 sockets for 25 calls).
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                lines = handle.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[9] in inodes:
                found.add(fields[9])
    return len(found)


async def wait_for(condition: Callable[[], bool], what: str, limit: float = 30.0) -> None:
    """A bounded wait for a condition (checked, never slept on blindly)."""
    with anyio.fail_after(limit):
        while not condition():  # noqa: ASYNC110 (another thread or process owns it)
            await anyio.sleep(0.005)
    assert condition(), what


async def error_of_a_call_closed_under(
    call: Callable[[], Awaitable[object]],
    ready: anyio.Event,
    close: Callable[[], Awaitable[None]],
    error: type[E],
    limit: float = 15.0,
) -> E:
    """The ``error`` a call in flight ends with when ``close`` runs once ``ready`` is set."""
    caught: list[E] = []

    async def run() -> None:
        try:
            await call()
        except error as exc:
            caught.append(exc)

    with anyio.fail_after(limit):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await ready.wait()
            await close()
    (exc,) = caught
    return exc


class HoldingService:
    """A simulator on loopback that can hold back its answers to SMS requests.

    The SMS itself is sent, and logged, as soon as its request arrives; only
    the answer waits. So while answers are held, every row a bulk worker has
    marked ``sending`` stays so, and the test can kill the worker with SMS
    requests in flight and look at its rows at leisure, instead of hoping a
    kill lands at the right moment. Also records when each request arrived.
    """

    def __init__(self, app: Simulator, portal: BlockingPortal) -> None:
        self.app = app
        self.portal = portal
        self.base_url = ""
        self.arrivals: list[float] = []
        self._released: anyio.Event | None = None
        self._hold_after = 0
        self._sms_requests = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.arrivals.append(time.monotonic())
        if not any(
            name == b"soapaction" and SEND.encode() in value for name, value in scope["headers"]
        ):
            await self.app(scope, receive, send)
            return
        self._sms_requests += 1
        released = self._released
        if released is None or self._sms_requests <= self._hold_after:
            await self.app(scope, receive, send)
            return

        async def held(message: Any) -> None:
            if message["type"] == "http.response.start":
                await released.wait()
            await send(message)

        await self.app(scope, receive, held)

    def hold_sms_answers(self, after: int = 0) -> None:
        """Hold the answers to SMS requests from the one after the ``after``-th
        request of the service's life (or from now on, if that one is past)."""

        def hold() -> None:
            self._released = anyio.Event()
            self._hold_after = after

        self.portal.call(hold)

    def release_sms_answers(self) -> None:
        def release() -> None:
            if self._released is not None:
                self._released.set()
                self._released = None

        self.portal.call(release)

    def texted(self) -> set[str]:
        """The phone numbers an SMS went to."""
        return {str(request.params.get("PhoneNumber")) for request in self.app.calls(SEND)}


@contextmanager
def serve_holding(simulator: Simulator) -> Iterator[HoldingService]:
    """Serve ``simulator`` on loopback from a thread, as a :class:`HoldingService`."""
    with start_blocking_portal() as portal:
        service = HoldingService(simulator, portal)
        with portal.wrap_async_context_manager(serve(service)) as server:
            service.base_url = server.base_url
            try:
                yield service
            finally:
                # Held answers would keep the server's connections from closing.
                service.release_sms_answers()


def run_cli(
    *args: str, base_url: str, username: str = USER, password: str = PASSWORD, **environ: str
) -> subprocess.CompletedProcess[str]:
    """``verif-client`` in a subprocess, configured through the environment
    (``environ``: more variables)."""
    env = {
        **os.environ,
        "VERIF_BASE_URL": base_url,
        "VERIF_API_USERNAME": username,
        "VERIF_API_PASSWORD": password,
        **environ,
    }
    command = [sys.executable, "-m", "verif_client._cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
