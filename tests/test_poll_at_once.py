"""Polls made at once (from their answers' callbacks) report what awaited polls report.

On asyncio a poll run makes its polls from the event loop's callbacks when a
connection is ready (see _pollchain's Chain and the pool's send_at_once); with
hooks, or on trio, every poll is a call its worker awaits. Each test here runs
the same script twice over loopback, against a raw HTTP/1.1 service of its
own that misbehaves as told, once each way, and compares everything a poll
reports, and what the service saw.
"""

from __future__ import annotations

import gc
import math
import os
import socket
import types
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import asmx
import attrs
import pytest
import sniffio
from relsupport import WITH_UVLOOP, client_sockets_to, wait_for

import verif_client as vc
from verif_client._atonce import PoolCallsAtOnce
from verif_client._transport import StaleConnection, _pool
from verif_client._transport._pool import ConnectionPool

VERIFIED_OP = vc.get_operation("SecureLink_SecurityCode_HasBeenVerified")
SOAP = vc.Binding.SOAP11
RETRY = vc.RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=0.002, deadline=30)
NOW = vc.PollPolicy(
    initial_delay=0, multiplier=1, max_delay=0.001, jitter=0, timeout=30, retry=RETRY
)


def answer(body: bytes, status: bytes = b"200 OK") -> bytes:
    return (
        b"HTTP/1.1 %s\r\nContent-Type: text/xml; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s"
        % (
            status,
            len(body),
            body,
        )
    )


TRUE = answer(asmx.response(SOAP, VERIFIED_OP, "<Verified>true</Verified>"))
PENDING = answer(asmx.response(SOAP, VERIFIED_OP, '<Verified xsi:nil="true" />'))
FAULT_BODY = asmx.envelope(
    SOAP,
    "<soap:Fault><faultcode>soap:Client</faultcode>"
    "<faultstring>Server was unable to process request. ---&gt; bad id</faultstring>"
    "</soap:Fault>",
)
FAULT = answer(FAULT_BODY, b"500 Internal Server Error")
UNAVAILABLE = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
TOO_MANY = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n"
# What a peer does instead of answering.
CLOSE = b"close"
HANG = b"hang"
GARBAGE = b"NOT HTTP AT ALL\r\n\r\n"
HALF = TRUE[: len(TRUE) - 40]
GARBLED = TRUE[:-60] + b"<<<" + b"x" * 57
TOO_BIG = b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n"
FALSE = answer(asmx.response(SOAP, VERIFIED_OP, "<Verified>false</Verified>"))
# The same answer in 16-byte pieces a few milliseconds apart (a slow peer:
# the head and the body are read in many events, each taken as it comes).
TRICKLED = b"trickle"
# An answer after which the service closes the connection, as it said it would.
TRUE_CLOSING = TRUE.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
# PENDING, then the connection closed with it, though nothing said it would
# (a server at its keep-alive limit): the close in the answer's own segment,
# so that it is on the client's socket when the answer is read.
PENDING_AND_GONE = b"pending, and gone"


class Scripted:
    """A raw HTTP/1.1 service: its n-th request (from 0) gets ``actions[n]``
    (bytes to send, or CLOSE, HANG, TRICKLED: TRUE a piece at a time, HALF:
    send that much and close); the last action repeats."""

    def __init__(self, actions: list[bytes]) -> None:
        self.actions = actions
        self.requests = 0
        self.connections = 0

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        self.connections += 1
        buffer = b""
        async with stream:
            while True:
                while b"\r\n\r\n" not in buffer:
                    try:
                        buffer += await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        return
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buffer) < length:
                    buffer += await stream.receive()
                buffer = buffer[length:]
                action = self.actions[min(self.requests, len(self.actions) - 1)]
                self.requests += 1
                if action == HANG:
                    await anyio.sleep_forever()
                if action == CLOSE:
                    return
                if action == PENDING_AND_GONE:
                    sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
                    # Corked, the answer waits for the shutdown, and its FIN goes with it.
                    cork = getattr(socket, "TCP_CORK", None)
                    if cork is not None:
                        sock.setsockopt(socket.IPPROTO_TCP, cork, 1)
                    await stream.send(PENDING)
                    await stream.send_eof()
                    return
                if action == TRICKLED:
                    for at in range(0, len(TRUE), 16):
                        await stream.send(TRUE[at : at + 16])
                        await anyio.sleep(0.002)
                    continue
                await stream.send(action)
                if action is HALF or action == GARBAGE or action is TRUE_CLOSING:
                    return


@asynccontextmanager
async def serving(actions: list[bytes]) -> AsyncIterator[tuple[Scripted, int]]:
    service = Scripted(actions)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, service.handle)
        try:
            yield service, port
        finally:
            tg.cancel_scope.cancel()


class AtOnceCount:
    """How many attempts the pool started at once: a spy on the calls' start, which
    sends through ConnectionPool.send_at_once, its only caller, and says whether it
    started. The chain calls it through the CallsAtOnce protocol, looked up as an
    attribute: the spy sees it under mypyc's build too (see hatch_build.py)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started = 0
        original = PoolCallsAtOnce.start

        def counting(calls: PoolCallsAtOnce, *args: Any, **kwargs: Any) -> bool:
            started = original(calls, *args, **kwargs)
            self.started += started
            return started

        monkeypatch.setattr(PoolCallsAtOnce, "start", counting)


def reported(outcome: vc.VerificationOutcome) -> tuple[object, ...]:
    error = outcome.error
    return (
        outcome.request_id,
        outcome.status,
        outcome.attempts,
        outcome.result,
        None if error is None else (type(error).__name__, str(error), error.operation),
    )


async def polled(
    actions: list[bytes],
    *,
    at_once: bool,
    ids: list[int],
    policy: vc.PollPolicy = NOW,
    time_limit: float = 30,
    workers: int = 1,
    retry: vc.RetryPolicy = RETRY,
    host: str = "127.0.0.1",
) -> tuple[list[tuple[object, ...]], int, int]:
    """What each id's poll reported, the requests the service saw, and its connections."""
    async with serving(actions) as (service, port):
        client = vc.VerificationClient(
            f"http://{host}:{port}",
            username="tester",
            password="tester-password",
            retry=retry,
            timeout=time_limit,
            hooks=None if at_once else vc.Hooks(),
        )
        async with client:
            with anyio.fail_after(20):
                async with client.poll_verifications(
                    ids, policy=policy, max_concurrency=workers
                ) as outcomes:
                    settled = [reported(outcome) async for outcome in outcomes]
            # Every connection the pool counts is open, and every one open is counted.
            pool = client._connections
            assert isinstance(pool, ConnectionPool)
            await wait_for(
                lambda: client_sockets_to(port) == pool.open_connections,
                "the pool's connections are the sockets open",
                limit=10,
            )
        await wait_for(
            lambda: client_sockets_to(port) == 0, "the client's sockets closed", limit=10
        )
    return sorted(settled, key=repr), service.requests, service.connections


SCRIPTS: dict[str, list[bytes]] = {
    "pending, then verified": [PENDING, PENDING, TRUE],
    "a fault": [FAULT],
    "503s retried": [UNAVAILABLE, UNAVAILABLE, TRUE],
    "503s past the retries": [UNAVAILABLE],
    "a 429, then verified": [TOO_MANY, TRUE],
    "closed before answering": [CLOSE, TRUE],
    "closed in the middle of an answer": [HALF, TRUE],
    "not HTTP": [GARBAGE, TRUE],
    "a garbled answer asked again": [GARBLED, TRUE],
    "an answer with bytes after it": [TRUE + b"HTTP/1.1 200 OK\r\n\r\n", PENDING, TRUE],
    "closed for good": [CLOSE],
    "an answer over the size cap": [PENDING, TOO_BIG],
    "a plain false, pending on a bool service": [TRUE, FALSE, TRUE],
    "answers that close their connection": [PENDING, TRUE_CLOSING, TRUE],
    "an answer that trickles in": [PENDING, TRICKLED, PENDING, TRICKLED],
}

# Never at once: after a 429 the client keeps a pace (every call waits its
# turn, awaited); a service that closes every connection leaves none ready.
AWAITED_ONLY = {"a 429, then verified", "closed for good"}


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", WITH_UVLOOP)
@pytest.mark.parametrize("script", list(SCRIPTS))
async def test_a_poll_reports_the_same_at_once_and_awaited(
    script: str, monkeypatch: pytest.MonkeyPatch, answer_parser: str
) -> None:
    count = AtOnceCount(monkeypatch)
    ids = [2**33 + n for n in range(3)]
    awaited = await polled(SCRIPTS[script], at_once=False, ids=ids)
    assert count.started == 0
    at_once = await polled(SCRIPTS[script], at_once=True, ids=ids)
    assert at_once == awaited
    if sniffio.current_async_library() == "trio" or script in AWAITED_ONLY:
        assert count.started == 0
    else:
        # The first poll opens the connection the awaited way; the next go at once.
        assert count.started >= 1


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", WITH_UVLOOP)
@pytest.mark.parametrize(
    "script",
    [
        "pending, then verified",
        "closed in the middle of an answer",
        "an answer over the size cap",
        "answers that close their connection",
    ],
)
async def test_a_service_named_by_its_host_name_is_polled_at_once_on_asyncio_and_uvloop(
    script: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 40: on uvloop, a name's connections are anyio's (its addresses
    # raced), taken over by a receiver: they are polled at once too, as the
    # loop's own are; only trio awaits its streams.
    count = AtOnceCount(monkeypatch)
    ids = [2**33 + n for n in range(3)]
    awaited = await polled(SCRIPTS[script], at_once=False, ids=ids, host="localhost")
    assert count.started == 0
    at_once = await polled(SCRIPTS[script], at_once=True, ids=ids, host="localhost")
    assert at_once == awaited
    if sniffio.current_async_library() == "trio":
        assert count.started == 0
    else:
        assert count.started >= 1


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", WITH_UVLOOP)
async def test_a_poll_on_a_connection_closed_with_the_last_answer_is_made_again_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On asyncio and uvloop the next poll of a chain takes the connection the
    # answer just put back without the idle check's poll(0), the check that
    # finds this close: its request, written into the closed connection, ends
    # before any answer, and the poll is made again on a new connection as
    # though the check had turned the old one away. No attempt is lost (there
    # is none to spare here), and the service sees what it sees awaited.
    count = AtOnceCount(monkeypatch)
    stale: list[str] = []

    class Spied(StaleConnection):
        def __init__(self, message: str, *, never_sent: bool) -> None:
            stale.append(message)
            super().__init__(message, never_sent=never_sent)

    monkeypatch.setattr(_pool, "StaleConnection", Spied)
    one = vc.RetryPolicy(attempts=1)
    options: dict[str, Any] = {
        "ids": [2**33, 2**33 + 1],
        "policy": attrs.evolve(NOW, retry=one),
        "retry": one,
    }
    # The first request opens a connection (awaited), the second goes on it
    # at once and is answered with the close; the rest go on a new one.
    script = [PENDING, PENDING_AND_GONE, TRUE]
    awaited = await polled(script, at_once=False, **options)
    assert stale == []
    at_once = await polled(script, at_once=True, **options)
    assert at_once == awaited
    settled, requests, connections = at_once
    assert [row[1] for row in settled] == [vc.PollStatus.VERIFIED] * 2
    # The poll made again counts once, and its request never reached the service.
    assert sorted(row[2] for row in settled) == [1, 3]
    assert (requests, connections) == (4, 2)
    if sniffio.current_async_library() == "trio":
        assert stale == []
        assert count.started == 0
    else:
        assert len(stale) == 1
        assert stale[0].startswith(("ReadError: ", "RemoteProtocolError: ")), stale


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", WITH_UVLOOP[:2])  # trio polls no connection at once
@pytest.mark.parametrize("idempotent", [True, False], ids=["poll", "send"])
async def test_only_a_poll_goes_unchecked_on_the_connection_its_answer_just_closed(
    idempotent: bool,
) -> None:
    # From the callback of an answer that came with the peer's close, a
    # request that must not be sent twice is never written there: the idle
    # check's poll(0) still turns the connection away (nothing is sent, and
    # the caller opens another). Only an idempotent one, whose failure there
    # is made again elsewhere, goes without the check.
    request = b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    async with serving([PENDING, PENDING_AND_GONE]) as (service, port):
        client = vc.VerificationClient(
            f"http://127.0.0.1:{port}", username="tester", password="tester-password"
        )
        async with client:
            assert (await client.has_been_verified(2**33)).verified is None  # opens one
            pool = client._connections
            assert isinstance(pool, ConnectionPool)
            taken: list[object] = []
            outcomes: list[object] = []
            second = anyio.Event()

            def after(context: object, outcome: object) -> None:
                outcomes.append(outcome)
                taken.append(
                    pool.send_at_once(
                        request, 5.0, math.inf, 65536, VERIFIED_OP.name, ended, None, idempotent
                    )
                )
                if taken[0] is None:
                    second.set()

            def ended(context: object, outcome: object) -> None:
                outcomes.append(outcome)
                second.set()

            first = pool.send_at_once(
                request, 5.0, math.inf, 65536, VERIFIED_OP.name, after, None, True
            )
            assert first is not None  # on the connection the call left idle
            with anyio.fail_after(10):
                await second.wait()
    assert isinstance(outcomes[0], tuple)
    assert outcomes[0][0] == 200
    if idempotent:
        assert taken[0] is not None
        assert isinstance(outcomes[1], StaleConnection), outcomes
    else:
        assert taken == [None]
        assert len(outcomes) == 1
    assert service.requests == 2


@pytest.mark.anyio
async def test_many_ids_on_many_connections_report_the_same_at_once_and_awaited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    count = AtOnceCount(monkeypatch)
    ids = [2**33 + n for n in range(200)]
    script = [PENDING, TRUE, UNAVAILABLE, TRUE, CLOSE, PENDING, TRUE, HALF] * 3 + [TRUE]
    # Enough attempts that no id runs out of them by bad luck.
    many = vc.RetryPolicy(attempts=10, initial_backoff=0.001, max_backoff=0.002, deadline=30)
    policy = attrs.evolve(NOW, retry=many)  # a poll's calls retry under its policy's retry
    options: dict[str, Any] = {"ids": ids, "workers": 8, "retry": many, "policy": policy}
    awaited, awaited_requests, _ = await polled(script, at_once=False, **options)
    at_once, at_once_requests, _ = await polled(script, at_once=True, **options)
    # Which id meets which misbehaviour depends on the order polls reach the
    # service: every id must settle VERIFIED both ways, after as many requests.
    assert len(at_once) == len(awaited) == 200
    assert [row for row in at_once + awaited if row[1] is not vc.PollStatus.VERIFIED] == []
    assert at_once_requests == awaited_requests == 215  # 200 ids, 15 misbehaviours
    if sniffio.current_async_library() == "asyncio":
        assert count.started > 100


@pytest.mark.anyio
async def test_an_unanswered_poll_at_once_is_cut_at_its_ids_deadline() -> None:
    # The client's own time limit (30 s) is far off: the id's deadline cuts
    # the attempt in flight, and the id ends TIMED_OUT as an awaited poll's does.
    short = vc.PollPolicy(initial_delay=0, max_delay=0.001, jitter=0, timeout=1.5, retry=RETRY)
    ids = [2**33]
    script = [PENDING, HANG]
    awaited = await polled(script, at_once=False, ids=ids, policy=short)
    at_once = await polled(script, at_once=True, ids=ids, policy=short)
    assert at_once == awaited
    ((_, status, attempts, result, error),) = at_once[0]
    assert status is vc.PollStatus.TIMED_OUT
    assert attempts == 2
    assert result == vc.VerificationResult(verified=None)
    assert error is None


@pytest.mark.anyio
async def test_a_polls_one_attempt_cut_at_its_ids_deadline_ends_timed_out() -> None:
    # With no attempt left to retry in, the cut is still the id's deadline
    # (TIMED_OUT), not the attempt's own time limit (a TransportError).
    one = vc.RetryPolicy(attempts=1)
    short = vc.PollPolicy(initial_delay=0, max_delay=0.001, jitter=0, timeout=1.5, retry=one)
    options: dict[str, Any] = {"ids": [2**33], "policy": short, "retry": one}
    awaited = await polled([PENDING, HANG], at_once=False, **options)
    at_once = await polled([PENDING, HANG], at_once=True, **options)
    assert at_once == awaited
    ((_, status, attempts, _, error),) = at_once[0]
    assert status is vc.PollStatus.TIMED_OUT
    assert attempts == 2
    assert error is None


@pytest.mark.anyio
async def test_an_unanswered_attempt_at_once_times_out_and_is_retried() -> None:
    # The client's time limit cuts the attempt; the retry is answered.
    ids = [2**33]
    script = [PENDING, HANG, TRUE]
    awaited = await polled(script, at_once=False, ids=ids, time_limit=2)
    at_once = await polled(script, at_once=True, ids=ids, time_limit=2)
    assert at_once == awaited
    ((_, status, attempts, _, _),) = at_once[0]
    assert status is vc.PollStatus.VERIFIED
    assert attempts == 2
    assert at_once[1] == 3  # two polls, the second asked twice


@pytest.mark.anyio
async def test_leaving_a_run_with_polls_in_flight_at_once_closes_their_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    count = AtOnceCount(monkeypatch)
    # Every id answered pending once (each worker's connection is then
    # ready), then never: the polls in flight are made at once.
    async with (
        serving([PENDING] * 4 + [HANG]) as (service, port),
        vc.VerificationClient(
            f"http://127.0.0.1:{port}", username="tester", password="tester-password"
        ) as client,
    ):
        with anyio.fail_after(20):
            async with client.poll_verifications(
                [2**33 + n for n in range(4)], policy=NOW, max_concurrency=4
            ) as outcomes:
                await wait_for(lambda: service.requests >= 8, "every id polled twice", limit=10)
                del outcomes
        # Out of the run, the client still open: no poll's socket is left.
        await wait_for(lambda: client_sockets_to(port) == 0, "the polls' sockets closed", limit=10)
    if sniffio.current_async_library() == "asyncio":
        assert count.started >= 4


ONE_ATTEMPT = vc.RetryPolicy(attempts=1)
# Time limits and deadlines here are far longer than a loopback answer takes on
# a loaded machine: only the peer that never answers meets them.
# What the second poll (made at once, on the first poll's connection) meets,
# and the words its one attempt fails with.
LAST_WORDS = {
    "closed before answering": (CLOSE, "Server disconnected without sending a response"),
    "closed in the middle of an answer": (HALF, "peer closed connection"),
    "not HTTP": (GARBAGE, "RemoteProtocolError"),
    "no answer in time": (HANG, "Timeout: no complete answer within 1 s"),
}


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", WITH_UVLOOP)
@pytest.mark.parametrize("failure", list(LAST_WORDS))
async def test_a_poll_whose_one_attempt_fails_at_once_fails_with_its_words(
    failure: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = AtOnceCount(monkeypatch)
    action, words = LAST_WORDS[failure]
    ids = [2**33]
    options: dict[str, Any] = {"ids": ids, "retry": ONE_ATTEMPT, "time_limit": 1}
    policy = attrs.evolve(NOW, retry=ONE_ATTEMPT)
    awaited = await polled([PENDING, action], at_once=False, policy=policy, **options)
    at_once = await polled([PENDING, action], at_once=True, policy=policy, **options)
    assert at_once == awaited
    ((_, status, attempts, result, error),) = at_once[0]
    assert status is vc.PollStatus.FAILED
    assert attempts == 2
    assert result == vc.VerificationResult(verified=None)
    assert error is not None
    assert error[0] == "TransportError"
    assert words in error[1]
    if sniffio.current_async_library() == "asyncio":
        assert count.started == 1


@pytest.mark.anyio
async def test_an_attempt_at_once_leaves_no_deadline_behind_on_its_connection() -> None:
    # Polls 1.2 s apart on one kept connection, each attempt allowed 0.8 s:
    # a deadline left behind by the second would cut the third, on the same
    # connection, the moment its answer came (a new connection, a retry).
    apart = vc.PollPolicy(initial_delay=1.2, multiplier=1, max_delay=1.2, jitter=0, timeout=30)
    options: dict[str, Any] = {"ids": [2**33], "policy": apart, "time_limit": 0.8}
    awaited = await polled([PENDING, PENDING, TRUE], at_once=False, **options)
    at_once = await polled([PENDING, PENDING, TRUE], at_once=True, **options)
    assert at_once == awaited
    settled, requests, connections = at_once
    assert [row[1:3] for row in settled] == [(vc.PollStatus.VERIFIED, 3)]
    assert (requests, connections) == (3, 1)


@pytest.mark.anyio
async def test_a_poll_due_at_its_ids_deadline_is_cut_at_once() -> None:
    # Pending for ever: the last poll is due at the id's deadline itself, and
    # it is cut there, never sent (how many polls came before depends on the
    # machine's pace, so only the ending is compared).
    pending = vc.PollPolicy(initial_delay=0.1, multiplier=1, max_delay=0.1, jitter=0, timeout=0.35)
    for at_once in (False, True):
        settled, requests, _ = await polled([PENDING], at_once=at_once, ids=[2**33], policy=pending)
        ((_, status, attempts, result, error),) = settled
        assert status is vc.PollStatus.TIMED_OUT
        assert error is None
        assert result == vc.VerificationResult(verified=None)
        if sniffio.current_async_library() == "asyncio":
            # The last poll, due at the deadline, never left (trio's scopes
            # take an expired deadline at the scheduler's next pass).
            assert requests == attempts - 1


# The package's own directory: a frame is ours if its code is in it. Not a
# name in the path: a clone named verif_client holds its venv (.nox/, .venv/)
# and its tests, and trio's frames there (a cancellation's traceback, freed by
# the collector at the pace the scheduler happened to run) counted as ours.
PACKAGE = os.path.dirname(vc.__file__) + os.sep


def _ours(thing: object) -> str | None:
    """What ``thing`` is, if it is ours: an object of our classes, or a frame
    of our code (nothing of trio's, anyio's, outcome's or the tests')."""
    if isinstance(thing, types.FrameType):
        code = thing.f_code
        return f"frame {code.co_qualname}" if code.co_filename.startswith(PACKAGE) else None
    module = type(thing).__module__
    ours = module == "verif_client" or module.startswith("verif_client.")
    return type(thing).__qualname__ if ours else None


def test_only_frames_of_the_package_itself_are_ours() -> None:
    # A fresh clone named verif_client with its venv inside (nox's .nox/):
    # trio's frames there were counted as ours, and the count of them the
    # collector found depended on when it had last run (issue 39).
    clone = os.path.dirname(os.path.dirname(PACKAGE.rstrip(os.sep)))
    theirs = os.path.join(
        clone, "verif_client", ".nox", "tests", "lib", "python3.11", "site-packages", "trio", "x.py"
    )
    frames: dict[str, types.FrameType] = {}
    for name, filename in (("theirs", theirs), ("ours", os.path.join(PACKAGE, "_x.py"))):
        code = compile(f"import sys\nframes[{name!r}] = sys._getframe()", filename, "exec")
        exec(code, {"frames": frames})
    assert _ours(frames["theirs"]) is None
    assert _ours(frames["ours"]) == "frame <module>"
    assert _ours(vc.RetryPolicy()) == "RetryPolicy"
    assert _ours(Counter()) is None


def _collected() -> Counter[str]:
    """What of ours the collector frees, but each connection's parser (llhttp
    holds its protocol's methods: a cycle per connection, not per poll)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
    finally:
        gc.set_debug(0)
    found = Counter(name for name in map(_ours, gc.garbage) if name is not None)
    gc.garbage.clear()
    gc.collect()  # saved above, so only now freed
    return found - Counter({"LlhttpAnswer": 10**6})


# Every id meets the failure on a kept connection, its first attempt made at
# once (in "an answer over the size cap" only the first id does: the answer
# closes the connection, and later ids find none ready).
KEPT_FAILING = {
    "answers over the size cap, each on a kept connection": [PENDING, TOO_BIG] * 30,
    "faults, each on a kept connection": [PENDING, FAULT] * 30,
}


@pytest.mark.anyio
@pytest.mark.parametrize("script", [*SCRIPTS, *KEPT_FAILING])
async def test_a_poll_at_once_leaves_nothing_to_the_collector(script: str) -> None:
    # Each poll's objects must be freed when it is answered, not left in a
    # cycle: a cycle lives on, poll after poll, until the collector's oldest
    # generation walks the whole heap to find it (at a thousand connections
    # that was a tenth of a poll's CPU). So what the collector finds must not
    # grow with the polls made. Failures too: an error's traceback holds the
    # frames it went through, a cycle wherever one of them keeps the error.
    found = []
    gc.collect()
    gc.disable()
    try:
        for at_once in (True, False):
            for ids in (3, 12):
                actions = SCRIPTS.get(script) or KEPT_FAILING[script]
                await polled(actions, at_once=at_once, ids=[2**33 + n for n in range(ids)])
                found.append(_collected())
    finally:
        gc.enable()
    assert found[1] == found[0]
    assert found[3] == found[2]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", WITH_UVLOOP)
async def test_leaving_a_run_with_polls_in_flight_at_once_leaves_no_attempt_behind() -> None:
    # Cancelled polls (Ctrl-C, a caller's deadline) end their attempts
    # unheard: the attempt must let go of its call then too. (Each worker's
    # frames stay in the collector's hands once: a cancellation's traceback
    # holds them, once per run, not per poll.)
    gc.collect()
    gc.disable()
    try:
        async with (
            serving([PENDING] * 8 + [HANG]) as (service, port),
            vc.VerificationClient(f"http://127.0.0.1:{port}") as client,
        ):
            with anyio.fail_after(20):
                async with client.poll_verifications(
                    [2**33 + n for n in range(8)], policy=NOW, max_concurrency=8
                ):
                    await wait_for(lambda: service.requests >= 16, "every id polled twice")
        left = _collected()
    finally:
        gc.enable()
    assert left["AttemptAtOnce"] == left["_CallAtOnce"] == 0
