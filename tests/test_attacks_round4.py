"""Issue 39, part 4: the promises about proxies, client certificates and
Retry-After (README.md, SECURITY.md, docs/client.md, docs/bulk.md), each
attacked from outside by a peer of the test's own on loopback.

Every call runs under a ``fail_after`` guard far above its deadline: a guard
that fires is a call that would never have ended. No timing is asserted.
"""

from __future__ import annotations

import base64
import logging
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from anyio.from_thread import start_blocking_portal
from anyio.streams.tls import TLSListener
from proxysupport import (
    GARBAGE,
    PROXY_PASSWORD,
    SERVICE,
    Certificates,
    ForwardProxy,
    forward_proxy,
    proxy_url,
    simulator_server,
    without_proxy_variables,
)
from relsupport import PASSWORD, USER, WITH_UVLOOP, run_cli
from test_retry_after import Scripted, http_date
from test_transport_bad_peers import (
    GUARD,
    NOT_VERIFIED,
    SMS_SENT,
    VERIFIED_TRUE,
    Wire,
    http_response,
    raw_server,
    send_sms,
)

import verif_client as vc
from verif_client._retry import retry_after
from verif_client._transport._proxy import choose_proxy
from verif_client.simulator import Simulator

pytestmark = pytest.mark.anyio

FAST = vc.RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=0.002, deadline=10)
# For peers that hold a call: each attempt is cut at 0.5 s, the call at 2 s.
SHORT = vc.RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=0.002, deadline=2)


@pytest.fixture(params=WITH_UVLOOP)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    without_proxy_variables(monkeypatch)


def client(base_url: str, **options: Any) -> vc.VerificationClient:
    options.setdefault("retry", FAST)
    return vc.VerificationClient(base_url, username=USER, password=PASSWORD, **options)


# -- Retry-After --------------------------------------------------------------------------


def asking(status: bytes, wait: str) -> bytes:
    """An answer asking to wait ``wait``, its bytes as a header carries them (latin-1)."""
    return http_response(
        b"Slow down", status=status, headers=b"Retry-After: %s\r\n" % wait.encode("latin-1")
    )


@pytest.mark.parametrize(
    "value",
    [
        "\xb2",  # "²": str.isdigit() says yes, float() says no
        "1\xb9",
        "Wed, 21 Oct 99999999999 07:28:00 GMT",  # a year past datetime's
        "Sat, 01 Jan 10000 00:00:00 GMT",
        "-5",
        "-0",
        "1.5",
        "1e3",
        "nan",
        "inf",
        "soon",
        "0x10",
        "",
    ],
)
def test_a_retry_after_that_is_no_wait_is_none_never_an_exception(value: str) -> None:
    assert retry_after([("Retry-After", value)]) is None


@pytest.mark.parametrize(
    "value",
    [
        "Wed, 21 Oct 2015 07:28:00 GMT",  # RFC 1123
        "Wednesday, 21-Oct-15 07:28:00 GMT",  # RFC 850
        "Wed Oct 21 07:28:00 2015",  # asctime: no zone, GMT as every HTTP date
    ],
)
def test_retry_after_takes_the_three_forms_of_an_http_date(value: str) -> None:
    now = datetime(2015, 10, 21, 7, 27, tzinfo=UTC).timestamp()
    assert retry_after([("Retry-After", value)], now=lambda: now) == 60.0


@pytest.mark.parametrize(
    ("value", "at_least"),
    [
        ("999999999", 999999999.0),
        ("9" * 400, 1e10),  # float() makes it inf: a wait that still adds up and prints
        ("Fri, 31 Dec 9999 23:59:59 GMT", 1e10),
    ],
)
def test_a_huge_retry_after_is_a_finite_wait(value: str, at_least: float) -> None:
    wait = retry_after([("Retry-After", value)])
    assert wait is not None
    assert at_least <= wait < float("inf")


@pytest.mark.parametrize("value", ["\xb2", "Wed, 21 Oct 99999999999 07:28:00 GMT"])
async def test_a_retry_after_the_parser_chokes_on_is_the_http_error_not_a_crash(
    value: str,
) -> None:
    # Before the fix: ValueError / OverflowError out of the call (the CLI's exit 70).
    server = Scripted(asking(b"503 Service Unavailable", value), NOT_VERIFIED)
    async with raw_server(server) as port, client(f"http://127.0.0.1:{port}") as c:
        with anyio.fail_after(GUARD):
            assert (await c.has_been_verified(7)).verified is False
    assert server.requests == 2
    server = Scripted(asking(b"503 Service Unavailable", value), SMS_SENT)
    async with raw_server(server) as port, client(f"http://127.0.0.1:{port}") as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.HTTPStatusError) as caught:
            await send_sms(c)
    assert caught.value.retry_after is None
    assert server.requests == 1  # a 503 to a send: never repeated


@pytest.mark.parametrize("wait", ["999999999", "9" * 400, "date"])
async def test_a_huge_retry_after_on_a_send_fails_it_at_once_and_holds_no_later_call_forever(
    wait: str,
) -> None:
    value = http_date(10**9) if wait == "date" else wait
    server = Scripted(asking(b"429 Too Many Requests", value))
    async with raw_server(server) as port, client(f"http://127.0.0.1:{port}", retry=SHORT) as c:
        with anyio.fail_after(GUARD):
            with pytest.raises(vc.HTTPStatusError) as caught:
                await send_sms(c)
            assert "Retry-After" in str(caught.value)
            assert "inf" not in str(caught.value)
            # The next calls, a send and a read, are held by the 429 (nothing
            # may leave before its Retry-After) only as long as their deadline.
            for call in (lambda: send_sms(c), lambda: c.has_been_verified(7)):
                with pytest.raises(vc.HTTPStatusError) as held:
                    await call()
                assert held.value.status_code == 429
                assert "not sent" in str(held.value)
    assert server.requests == 1  # the held calls never left


@pytest.mark.parametrize("wait", ["-1", "soon", "0", "date-past"])
async def test_a_429_to_a_send_with_a_retry_after_that_is_no_wait_sends_it_once_more(
    wait: str,
) -> None:
    value = http_date(-3600) if wait == "date-past" else wait
    server = Scripted(asking(b"429 Too Many Requests", value), SMS_SENT)
    async with raw_server(server) as port, client(f"http://127.0.0.1:{port}") as c:
        with anyio.fail_after(GUARD):
            assert (await send_sms(c)).request_id == 7
    assert server.requests == 2


@pytest.mark.parametrize("status", [b"502 Bad Gateway", b"503 Service Unavailable", b"504 Timeout"])
async def test_a_retry_after_of_0_on_a_gateway_error_never_repeats_a_send(status: bytes) -> None:
    # Processed or not, nobody can tell: asked to come back at once, a send still is not.
    server = Scripted(asking(status, "0"), SMS_SENT)
    async with raw_server(server) as port, client(f"http://127.0.0.1:{port}") as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.HTTPStatusError):
            await send_sms(c)
        assert server.requests == 1
        # A read is asked again.
        server.answers = [asking(status, "0"), NOT_VERIFIED]
        with anyio.fail_after(GUARD):
            assert (await c.has_been_verified(7)).verified is False
    assert server.requests == 3


async def test_a_send_whose_fate_is_unknown_after_a_429_is_never_sent_again() -> None:
    # 429 (refused: sent again), then the service reads the send and hangs up.
    requests: list[bytes] = []

    async def refuse_then_drop(stream: anyio.abc.ByteStream) -> None:
        wire = Wire(stream)
        while (request := await wire.request()) is not None:
            requests.append(request)
            if len(requests) > 1:
                return  # read, never answered
            await stream.send(asking(b"429 Too Many Requests", "0"))

    async with raw_server(refuse_then_drop) as port, client(f"http://127.0.0.1:{port}") as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.DeliveryUnknownError):
            await send_sms(c)
    assert len(requests) == 2


async def test_a_poll_run_meeting_a_huge_retry_after_ends_by_its_own_deadline() -> None:
    server = Scripted(asking(b"429 Too Many Requests", "999999999"))
    policy = vc.PollPolicy(initial_delay=0.01, max_delay=0.02, timeout=3, retry=SHORT)
    outcomes: list[vc.VerificationOutcome] = []
    async with raw_server(server) as port, client(f"http://127.0.0.1:{port}", retry=SHORT) as c:
        with anyio.fail_after(GUARD):
            async with c.poll_verifications([7, 8], policy=policy) as stream:
                async for outcome in stream:
                    outcomes.append(outcome)
    assert sorted(o.request_id for o in outcomes) == [7, 8]
    assert all(o.status is not vc.PollStatus.VERIFIED for o in outcomes)


async def test_waiting_for_one_id_meeting_a_huge_retry_after_ends_by_its_policy() -> None:
    server = Scripted(asking(b"429 Too Many Requests", "999999999"))
    policy = vc.PollPolicy(initial_delay=0.01, max_delay=0.02, timeout=3, retry=SHORT)
    async with raw_server(server) as port, client(f"http://127.0.0.1:{port}", retry=SHORT) as c:
        with anyio.fail_after(GUARD):
            outcome = await c.wait_until_verified(7, policy=policy)
    assert outcome.status in (vc.PollStatus.TIMED_OUT, vc.PollStatus.FAILED)
    assert server.requests == 1  # every later poll held by the 429, none sent


def test_the_blocking_client_meeting_a_huge_retry_after_is_bounded_too() -> None:
    server = Scripted(asking(b"429 Too Many Requests", "999999999"))
    with served_in_thread(server) as port:
        url = f"http://127.0.0.1:{port}"
        with vc.SyncVerificationClient(url, username=USER, password=PASSWORD, retry=SHORT) as c:
            for _ in range(2):  # the first refused at once, the second held to its deadline
                with pytest.raises(vc.HTTPStatusError, match="Retry-After"):
                    c.send_confirmation_sms("5125550100", "Is this you?")
    assert server.requests == 1


@pytest.mark.parametrize(("wait", "requests"), [("999999999", 1), ("-1", 2), ("date-past", 2)])
async def test_a_503_to_a_send_opted_in_honours_retry_after_within_its_deadline(
    wait: str, requests: int
) -> None:
    value = http_date(-3600) if wait == "date-past" else wait
    server = Scripted(asking(b"503 Service Unavailable", value), SMS_SENT)
    opted_in = vc.RetryPolicy(attempts=3, initial_backoff=0.001, retry_sends_on_503=True)
    async with raw_server(server) as port, client(f"http://127.0.0.1:{port}", retry=opted_in) as c:
        with anyio.fail_after(GUARD):
            if requests == 1:
                with pytest.raises(vc.HTTPStatusError, match="Retry-After"):
                    await send_sms(c)
            else:
                assert (await send_sms(c)).request_id == 7
    assert server.requests == requests


@pytest.mark.parametrize("wait", ["date-past", "Wed Oct 21 07:28:00 2015", "\xb2", "-3"])
async def test_a_poll_run_asked_to_wait_by_a_date_past_or_a_bad_value_polls_on(wait: str) -> None:
    value = http_date(-3600) if wait == "date-past" else wait
    server = Scripted(asking(b"429 Too Many Requests", value), VERIFIED_TRUE)
    policy = vc.PollPolicy(initial_delay=0.01, max_delay=0.02, timeout=10, retry=FAST)
    async with raw_server(server) as port, client(f"http://127.0.0.1:{port}") as c:
        with anyio.fail_after(GUARD):
            async with c.poll_verifications([7], policy=policy) as stream:
                outcomes = [outcome async for outcome in stream]
    assert [o.status for o in outcomes] == [vc.PollStatus.VERIFIED]
    assert server.requests == 2


# -- a proxy that misbehaves ----------------------------------------------------------------

ProxyScript = Callable[[anyio.abc.SocketStream, Wire, bytes], Awaitable[None]]


class ScriptedProxy:
    """A proxy of the test's own: reads each CONNECT (or absolute-form request),
    logs its head, and hands the connection to ``script``."""

    def __init__(self, script: ProxyScript) -> None:
        self.script = script
        self.heads: list[bytes] = []
        self.connections = 0

    async def __call__(self, stream: anyio.abc.SocketStream) -> None:
        self.connections += 1
        wire = Wire(stream)
        request = await wire.request()
        if request is not None:
            head = request.partition(b"\r\n\r\n")[0]
            self.heads.append(head)
            await self.script(stream, wire, head)


@pytest.fixture(scope="module")
def certificates() -> Certificates:
    return Certificates()


@pytest.fixture
def sim() -> Simulator:
    return Simulator(credentials=(USER, PASSWORD))


@pytest.fixture
async def https_port(certificates: Certificates, sim: Simulator) -> AsyncIterator[int]:
    async with simulator_server(sim, certificates.server_context()) as port:
        yield port


ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"


async def established_then_garbage(stream: anyio.abc.SocketStream, wire: Wire, _: bytes) -> None:
    await stream.send(ESTABLISHED)
    await stream.receive()  # the client's TLS hello, to no one
    await stream.send(GARBAGE * 4)
    await anyio.sleep_forever()


async def established_then_close(stream: anyio.abc.SocketStream, wire: Wire, _: bytes) -> None:
    await stream.send(ESTABLISHED)
    await stream.receive()


async def established_then_silence(stream: anyio.abc.SocketStream, wire: Wire, _: bytes) -> None:
    await stream.send(ESTABLISHED)
    await anyio.sleep_forever()


async def established_with_garbage(stream: anyio.abc.SocketStream, wire: Wire, _: bytes) -> None:
    await stream.send(ESTABLISHED + GARBAGE)
    await anyio.sleep_forever()


async def never_answers(stream: anyio.abc.SocketStream, wire: Wire, _: bytes) -> None:
    await anyio.sleep_forever()


async def endless_head(stream: anyio.abc.SocketStream, wire: Wire, _: bytes) -> None:
    await stream.send(b"HTTP/1.1 200 Connection established\r\n")
    while True:
        await stream.send(b"X-Padding: " + b"a" * 1000 + b"\r\n")


async def continues_forever(stream: anyio.abc.SocketStream, wire: Wire, _: bytes) -> None:
    while True:
        await stream.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        await anyio.lowlevel.checkpoint()


@pytest.mark.parametrize(
    "script",
    [
        established_then_garbage,
        established_then_close,
        established_then_silence,
        established_with_garbage,
        never_answers,
        continues_forever,
        endless_head,
    ],
)
async def test_a_tunnel_that_never_reaches_the_service_fails_the_send_known_not_sent(
    certificates: Certificates, script: ProxyScript
) -> None:
    proxy = ScriptedProxy(script)
    async with (
        raw_server(proxy) as port,
        client(
            f"https://{SERVICE}:443",
            proxy=proxy_url(port),
            verify=certificates.trusting(),
            timeout=0.5,
            retry=SHORT,
        ) as c,
    ):
        with anyio.fail_after(GUARD), pytest.raises(vc.TransportError) as caught:
            await send_sms(c)
    error = caught.value
    # Nothing of the request left inside a tunnel: known not sent, never a
    # DeliveryUnknownError, so it was tried again (a new CONNECT each time).
    assert not isinstance(error, vc.DeliveryUnknownError), error
    assert len(proxy.heads) >= 2
    assert all(head.startswith(f"CONNECT {SERVICE}:443 ".encode()) for head in proxy.heads)
    assert PROXY_PASSWORD not in str(error) + repr(error.args)
    if script in (established_with_garbage, endless_head):
        assert isinstance(error, vc.ProxyError), error
        assert error.proxy == f"http://127.0.0.1:{port}"
    if script in (never_answers, continues_forever):
        # Cut at the attempt's deadline: which of the two was slow cannot be told.
        assert f"through the proxy http://127.0.0.1:{port} within 0.5 s" in str(error)


async def test_a_plain_http_proxy_that_hangs_up_after_the_request_leaves_a_send_unknown(
    sim: Simulator,
) -> None:
    async def read_then_close(stream: anyio.abc.SocketStream, wire: Wire, _: bytes) -> None:
        pass  # the whole request was read (and, for all we know, forwarded)

    proxy = ScriptedProxy(read_then_close)
    async with raw_server(proxy) as port, client(f"http://{SERVICE}", proxy=proxy_url(port)) as c:
        with anyio.fail_after(GUARD), pytest.raises(vc.DeliveryUnknownError) as caught:
            await send_sms(c)
        assert not isinstance(caught.value, vc.ProxyError)
        assert len(proxy.heads) == 1  # never sent again
        # A read is asked again, as after any dropped connection.
        with anyio.fail_after(GUARD), pytest.raises(vc.TransportError):
            await c.has_been_verified(7)
    assert len(proxy.heads) == 1 + FAST.attempts


async def test_a_tunnel_whose_service_hangs_up_after_the_request_leaves_a_send_unknown(
    certificates: Certificates,
) -> None:
    requests: list[bytes] = []

    async def read_then_close(stream: anyio.abc.ByteStream) -> None:
        request = await Wire(stream).request()
        if request is not None:
            requests.append(request)

    tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    service_port = tcp.extra(anyio.abc.SocketAttribute.local_port)
    listener = TLSListener(tcp, certificates.server_context(), standard_compatible=False)
    proxy = ForwardProxy()
    async with listener, anyio.create_task_group() as tg, forward_proxy(proxy) as port:
        tg.start_soon(listener.serve, read_then_close)
        url = f"https://{SERVICE}:{service_port}"
        options = {"verify": certificates.trusting(), "proxy": proxy_url(port)}
        async with client(url, **options) as c:
            with anyio.fail_after(GUARD), pytest.raises(vc.DeliveryUnknownError) as caught:
                await send_sms(c)
        tg.cancel_scope.cancel()
    assert not isinstance(caught.value, vc.ProxyError)
    assert len(requests) == 1
    assert proxy.tunnels == 1


async def test_a_407_loop_ends_within_the_policys_attempts(https_port: int) -> None:
    # Keeps the connection, answers 407 to every CONNECT on it, with a body it never sends.
    async def always_407(stream: anyio.abc.SocketStream, wire: Wire, head: bytes) -> None:
        while True:
            await stream.send(
                b'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="x"'
                b"\r\nContent-Length: 1000000000\r\n\r\n"
            )
            if await wire.request() is None:
                return

    proxy = ScriptedProxy(always_407)
    async with (
        raw_server(proxy) as port,
        client(f"https://{SERVICE}:{https_port}", proxy=proxy_url(port)) as c,
    ):
        with anyio.fail_after(GUARD), pytest.raises(vc.ProxyError) as caught:
            await send_sms(c)
    assert caught.value.status_code == 407
    assert "credentials" in str(caught.value)
    assert len(proxy.heads) <= FAST.attempts


@pytest.mark.parametrize(
    "status", [b"301 Moved Permanently", b"302 Found", b"307 Temporary Redirect"]
)
async def test_a_redirect_in_answer_to_connect_is_a_proxy_error_never_followed(
    status: bytes,
) -> None:
    elsewhere = ScriptedProxy(never_answers)

    async with raw_server(elsewhere) as other:

        async def redirect(stream: anyio.abc.SocketStream, wire: Wire, head: bytes) -> None:
            await stream.send(
                b"HTTP/1.1 %s\r\nLocation: http://127.0.0.1:%d/\r\nContent-Length: 0\r\n\r\n"
                % (status, other)
            )

        proxy = ScriptedProxy(redirect)
        async with raw_server(proxy) as port:
            async with client(f"https://{SERVICE}", proxy=proxy_url(port)) as c:
                with anyio.fail_after(GUARD), pytest.raises(vc.ProxyError) as caught:
                    await send_sms(c)
            # Plain HTTP: the proxy's redirect is the answer, never followed either.
            async with client(f"http://{SERVICE}", proxy=proxy_url(port)) as c:
                with anyio.fail_after(GUARD), pytest.raises(vc.HTTPStatusError) as plain:
                    await send_sms(c)
    assert caught.value.status_code == int(status[:3])
    assert plain.value.status_code == int(status[:3])
    assert elsewhere.connections == 0


# -- the proxy's password, in every spelling ------------------------------------------------

# (as written in the proxy URL, the password it means)
SPELLINGS = [
    ("p@ss:w%rd-Zq8", "p@ss:w%rd-Zq8"),  # reserved characters, not encoded
    ("p%40ss%3Aw%25rd-Zq8", "p@ss:w%rd-Zq8"),  # the same, percent-encoded
    ("pässwörd-ñ-Zq8", "pässwörd-ñ-Zq8"),  # non-ASCII, as typed
    ("p%C3%A4ssw%C3%B6rd-Zq8", "pässwörd-Zq8"),  # non-ASCII, percent-encoded
    ("50%25%20off%21-Zq8", "50% off!-Zq8"),
]


def token(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def spellings_of(written: str, password: str) -> list[str]:
    """Every form of the password that must not be shown: as meant, as written,
    percent-encoded, its UTF-8 read as latin-1, and the header's token."""
    forms = {
        password,
        written,
        quote(password, safe=""),
        password.encode().decode("latin-1"),
        token("proxy-user", password),
    }
    return sorted(forms)


def assert_not_shown(texts: list[str], forms: list[str]) -> None:
    for text in texts:
        for form in forms:
            # A cut (an excerpt of what the proxy sent) could keep its start.
            for length in range(5, len(form) + 1):
                assert form[:length] not in text, (form[:length], text)


def echoing(echo: bytes) -> ProxyScript:
    async def script(stream: anyio.abc.SocketStream, wire: Wire, head: bytes) -> None:
        await stream.send(
            b'HTTP/1.1 407 %s\r\nProxy-Authenticate: Basic realm="%s"\r\n'
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (echo, echo, len(head), head)
        )

    return script


@pytest.mark.parametrize(("written", "password"), SPELLINGS)
async def test_a_proxy_password_in_any_spelling_is_sent_right_and_never_shown(
    caplog: pytest.LogCaptureFixture, https_port: int, written: str, password: str
) -> None:
    caplog.set_level(logging.DEBUG)
    forms = spellings_of(written, password)
    basic = token("proxy-user", password).encode()
    echoes = [
        password.encode(),
        written.encode(),
        basic,
        # Past the 60 characters of the reason's excerpt: the cut falls in the password.
        b"x" * 52 + password.encode(),
        b"x" * 55 + basic,
    ]
    texts: list[str] = []
    heads: list[bytes] = []
    for echo in echoes:
        proxy = ScriptedProxy(echoing(echo))
        async with raw_server(proxy) as port:
            url = f"http://proxy-user:{written}@127.0.0.1:{port}"
            for base_url in (f"https://{SERVICE}:{https_port}", f"http://{SERVICE}"):
                async with client(base_url, proxy=url, retry=vc.NO_RETRY) as c:
                    texts += [repr(c), repr(c._proxy), str(vars(c))]
                    with anyio.fail_after(GUARD), pytest.raises(vc.ProxyError) as caught:
                        await send_sms(c)
                error = caught.value
                texts += [str(error), repr(error), repr(error.args), str(vars(error))]
                assert error.proxy == f"http://127.0.0.1:{port}"
        heads += proxy.heads
    texts.append(caplog.text)
    # Sent as meant: user:password in UTF-8, in every request to the proxy.
    assert len(heads) == 2 * len(echoes)
    assert all(b"\r\nProxy-Authorization: Basic " + basic in head for head in heads)
    assert_not_shown(texts, forms)


@pytest.mark.parametrize("written", ["pa#ss-Zq8", "pa/ss-Zq8", "pa?ss-Zq8"])
def test_a_proxy_password_that_breaks_the_url_fails_at_construction_unshown(
    monkeypatch: pytest.MonkeyPatch, written: str
) -> None:
    forms = spellings_of(written, written)
    for how in ("proxy", "HTTPS_PROXY", "all_proxy"):
        url = f"http://proxy-user:{written}@127.0.0.1:3128"
        if how != "proxy":
            monkeypatch.setenv(how, url)
        try:
            with pytest.raises(ValueError, match="proxy") as caught:
                vc.VerificationClient("https://x.test", proxy=url if how == "proxy" else None)
        finally:
            monkeypatch.delenv(how, raising=False)
        assert_not_shown([str(caught.value), repr(caught.value.args)], forms)


# -- NO_PROXY, against httpx's and curl's rules ---------------------------------------------

T, F = True, False
ERROR = "error"  # httpx refuses the variable (at the client's construction)

# (NO_PROXY, service URL, ours, httpx 0.28 (checked live below), curl (its
# CURLOPT_NOPROXY documentation: leading dot ignored, "*" only as the whole
# list, no ports, IPv6 without brackets, CIDR since 7.86; None: it says nothing)).
NO_PROXY_RULES: list[tuple[str, str, bool, bool | str, bool | None]] = [
    ("*", "https://api.example.com", T, T, T),
    ("other.com,*", "https://api.example.com", T, T, F),  # httpx: "*" anywhere
    ("", "https://api.example.com", F, F, F),
    (" , other.com ,, example.com , ", "https://api.example.com", T, T, T),
    ("example.com", "https://example.com", T, T, T),
    ("example.com", "https://api.example.com", T, T, T),
    ("example.com", "https://notexample.com", F, F, F),
    ("example.com", "https://example.com.evil.test", F, F, F),
    (".example.com", "https://api.example.com", T, T, T),
    (".example.com", "https://example.com", F, F, T),  # httpx: subdomains only
    ("*.example.com", "https://api.example.com", T, F, None),  # ours: as .example.com
    ("EXAMPLE.COM", "https://API.Example.com", T, T, T),
    ("example.com.", "https://api.example.com", T, F, T),  # curl: a trailing dot ignored
    ("example.com", "https://api.example.com.", T, F, T),
    ("example.com:8443", "https://api.example.com:8443", T, T, F),  # httpx: ports
    ("example.com:8443", "https://api.example.com", F, F, F),
    ("example.com:443", "https://api.example.com", T, F, F),  # ours: the default port counts
    ("localhost", "https://LOCALHOST:8443", T, T, T),
    ("10.0.0.1", "https://10.0.0.1", T, T, T),
    ("10.0.0.1", "https://10.0.0.12", F, F, F),
    ("0.0.1", "https://10.0.0.1", F, T, F),  # curl: an address is no domain
    ("10.0.0.1:8443", "https://10.0.0.1:8443", T, T, F),
    ("10.0.0.0/8", "https://10.1.2.3", T, F, T),  # curl: CIDR
    ("10.0.0.0/8", "https://11.1.2.3", F, F, F),
    ("10.0.0.0/8", "https://10.example.com", F, F, F),
    ("::1", "https://[::1]:8443", T, T, T),
    ("[::1]", "https://[::1]:8443", T, ERROR, None),
    ("[::1]:8443", "https://[::1]:8443", T, ERROR, F),
    ("[::1]:8443", "https://[::1]", F, ERROR, F),
    ("0:0::1", "https://[::1]", T, F, F),  # ours: addresses compared by value
    ("::FFFF:A00:1", "https://[::ffff:a00:1]", T, F, T),  # curl: any case
    ("fd00::/8", "https://[fd12::1]", T, ERROR, T),
    ("::1", "https://[::2]", F, F, F),
]


def httpx_bypasses(no_proxy: str, url: str) -> bool | str:
    """What httpx 0.28 decides, from its own reading of the environment."""
    import httpx
    from httpx._utils import URLPattern, get_environment_proxies

    with pytest.MonkeyPatch.context() as env:
        without_proxy_variables(env)
        env.setenv("HTTPS_PROXY", "http://p:3128")
        env.setenv("NO_PROXY", no_proxy)
        try:
            mounts = get_environment_proxies()
            patterns = sorted((URLPattern(key), value) for key, value in mounts.items())
        except httpx.InvalidURL:
            return ERROR
    for pattern, proxy in patterns:
        if pattern.matches(httpx.URL(url)):
            return proxy is None
    return True


@pytest.mark.parametrize(("no_proxy", "url", "ours", "httpx", "curl"), NO_PROXY_RULES)
def test_no_proxy_rules_against_httpx_and_curl(
    no_proxy: str, url: str, ours: bool, httpx: bool | str, curl: bool | None
) -> None:
    for name in ("NO_PROXY", "no_proxy"):
        environ = {"HTTPS_PROXY": "http://p:3128", name: no_proxy}
        chosen = choose_proxy(url, None, trust_env=True, environ=environ)
        assert (chosen is None) is ours, (name, no_proxy, url)
    # The httpx column is httpx's own answer: where we say we follow it, we do.
    assert httpx_bypasses(no_proxy, url) == httpx
    if ours != httpx and ours != curl:
        # Neither: a rule of ours, written in docs/client.md.
        assert (no_proxy, url) in OURS_ALONE


# Where we follow neither httpx nor curl (each in docs/client.md).
OURS_ALONE = {
    ("*.example.com", "https://api.example.com"),
    ("example.com:443", "https://api.example.com"),
    ("[::1]", "https://[::1]:8443"),
    ("[::1]:8443", "https://[::1]:8443"),
    ("0:0::1", "https://[::1]"),
}


# -- cert= ----------------------------------------------------------------------------------

KEY_PASSWORD = "K3y-pa55-ä-7d1e-never-show"


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from cryptography.hazmat.primitives import serialization

    certificates = Certificates()
    other = certificates.ca.issue_cert("someone-else@acme.test")
    folder = tmp_path_factory.mktemp("attacked-cert")
    paths = {
        name: folder / f"{name}.pem"
        for name in ("cert", "key", "other-key", "locked", "locked-traditional")
    }
    certificates.client.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    certificates.client.private_key_pem.write_to_path(str(paths["key"]))
    other.private_key_pem.write_to_path(str(paths["other-key"]))
    key = serialization.load_pem_private_key(
        certificates.client.private_key_pem.bytes(), password=None
    )
    encryption = serialization.BestAvailableEncryption(KEY_PASSWORD.encode())
    for name, form in (
        ("locked", serialization.PrivateFormat.PKCS8),
        ("locked-traditional", serialization.PrivateFormat.TraditionalOpenSSL),
    ):
        paths[name].write_bytes(key.private_bytes(serialization.Encoding.PEM, form, encryption))
    paths["folder"] = folder
    paths["missing"] = folder / "missing.pem"
    return paths


# (cert=, from the files, what the error says, the file it names)
BAD_CERTS: list[tuple[tuple[str, ...], str, str]] = [
    (("cert", "other-key"), "cannot load", "other-key"),  # a key of another certificate
    (("cert", "locked"), "the key is encrypted and no password was given", "locked"),
    (("cert", "locked-traditional"), "the key is encrypted and no password", "locked"),
    (("cert", "locked", "wrong-" + KEY_PASSWORD), "cannot load", "locked"),
    (("cert", "missing"), "no such file", "missing"),  # the key missing, not the certificate
    (("missing", "key"), "no such file", "missing"),
    (("folder",), "cannot load", "attacked-cert"),
]


@pytest.mark.parametrize(("names", "says", "names_file"), BAD_CERTS)
def test_a_bad_cert_is_a_clear_error_at_construction_without_its_password(
    pems: dict[str, Path], names: tuple[str, ...], says: str, names_file: str
) -> None:
    cert = tuple(str(pems[name]) if name in pems else name for name in names)
    with pytest.raises(ValueError, match=f"^cert: .*{says}") as caught:
        vc.VerificationClient("https://x.test", cert=cert)  # type: ignore[arg-type]
    message = str(caught.value)
    assert names_file in message
    if names[-1] == "missing":
        assert str(pems["missing"]) in message
    assert_not_shown([message, repr(caught.value.args)], spellings_of(KEY_PASSWORD, KEY_PASSWORD))


def in_a_terminal(command: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``command`` as the session leader of a terminal of its own (the
    terminal OpenSSL would prompt on); returns its status and all it wrote
    there. Killed if it has not ended in 30 s: a prompt waiting for input."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time

    leader, follower = pty.openpty()
    take_terminal = (
        "import fcntl, os, sys, termios; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", take_terminal, *command],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        close_fds=True,
    )
    os.close(follower)
    written = b""
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], deadline - time.monotonic())
            if not ready:
                break
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the child closed its side of the terminal
                break
            if not chunk:
                break
            written += chunk
    finally:
        os.close(leader)
        if child.poll() is None:
            child.kill()
        status = child.wait()
    return status, written.decode(errors="replace")


def test_the_cli_with_an_encrypted_key_and_no_password_never_prompts_in_a_terminal(
    pems: dict[str, Path],
) -> None:
    import os
    import sys

    env = {
        **os.environ,
        "VERIF_BASE_URL": "https://127.0.0.1:1",
        "VERIF_API_USERNAME": USER,
        "VERIF_API_PASSWORD": PASSWORD,
    }
    env.pop("VERIF_CLIENT_KEY_PASSWORD", None)
    command = [sys.executable, "-m", "verif_client._cli", "call", "GetMobileConsentText"]
    command += ["--client-cert", str(pems["cert"]), "--client-key", str(pems["locked"])]
    status, written = in_a_terminal(command, env)
    # Before: OpenSSL's "Enter PEM pass phrase:" on the terminal, waiting for good.
    assert "pass phrase" not in written.lower()
    assert status == 2, written
    assert "--client-cert: " in written
    assert "the key is encrypted and no password was given" in written
    assert "VERIF_CLIENT_KEY_PASSWORD" in written
    assert "Traceback" not in written
    # A wrong password: a usage error too, the password nowhere.
    env["VERIF_CLIENT_KEY_PASSWORD"] = "wrong-" + KEY_PASSWORD
    status, written = in_a_terminal(command, env)
    assert status == 2, written
    assert "cannot load" in written
    assert_not_shown([written], spellings_of(KEY_PASSWORD, KEY_PASSWORD))


# -- the command line -----------------------------------------------------------------------


@contextmanager
def served_in_thread(handler: Callable[[anyio.abc.SocketStream], Awaitable[None]]) -> Iterator[int]:
    """A raw server of the test's own on an event loop of its own thread, for the CLI."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(raw_server(handler)) as port,
    ):
        yield port


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The CLI's error: one line, last on stderr, never a traceback."""
    assert "Traceback" not in result.stderr
    return result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(("written", "password"), SPELLINGS)
def test_the_cli_shows_a_proxy_password_in_no_spelling(written: str, password: str) -> None:
    forms = spellings_of(written, password)
    basic = token("proxy-user", password).encode()
    proxy = ScriptedProxy(echoing(b"x" * 52 + password.encode() + b" " + basic))
    with served_in_thread(proxy) as port:
        url = f"http://proxy-user:{written}@127.0.0.1:{port}"
        texts = []
        for variable in ("VERIF_PROXY", "HTTPS_PROXY", "https_proxy"):
            result = run_cli(
                *("call", "HasBeenVerified", "RequestId=4294967297", "-v"),
                base_url=f"https://{SERVICE}:1",
                **{variable: url},
            )
            assert result.returncode == 1, result.stderr
            assert one_line(result).startswith("verif-client: ProxyError: ")
            texts += [result.stdout, result.stderr]
        # On the command line, refused before anything is sent.
        flag = run_cli(
            *("call", "HasBeenVerified", "RequestId=4294967297", "--proxy", url),
            base_url=f"https://{SERVICE}:1",
        )
        assert flag.returncode == 2
        texts += [flag.stdout, flag.stderr]
    assert all(b"Proxy-Authorization: Basic " + basic in head for head in proxy.heads)
    assert len(proxy.heads) == 3 * 4  # the CLI's policy: 4 attempts, each refused
    assert_not_shown(texts, forms)


@pytest.mark.parametrize(
    "url", ["http://proxy-user:pa#ss-Zq8@127.0.0.1:3128", "socks5://proxy-user:pa-ss-Zq8@h:1080"]
)
def test_the_cli_with_a_broken_proxy_url_is_a_usage_error_without_its_password(
    url: str,
) -> None:
    for variable in ("VERIF_PROXY", "HTTPS_PROXY"):
        result = run_cli(
            "call", "HasBeenVerified", "RequestId=4294967297",
            base_url="https://x.test", **{variable: url},
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        line = one_line(result)
        assert ("VERIF_PROXY" if variable == "VERIF_PROXY" else "HTTPS_PROXY") in line
        assert_not_shown([result.stdout, result.stderr], spellings_of("pa#ss-Zq8", "pa#ss-Zq8"))
        assert "pa-ss-Zq8" not in result.stdout + result.stderr


def test_the_cli_through_a_proxy_that_never_answers_connect_exits_1() -> None:
    proxy = ScriptedProxy(never_answers)
    with served_in_thread(proxy) as port:
        result = run_cli(
            *(
                "call",
                "SendRequestViaSms",
                "PhoneNumber=5125550100",
                "ConfirmationQuestion=Is this you?",
            ),
            *("--timeout", "0.5"),
            base_url=f"https://{SERVICE}:1",
            VERIF_PROXY=proxy_url(port),
        )
    assert result.returncode == 1, result.stderr
    line = one_line(result)
    assert f"through the proxy http://127.0.0.1:{port}" in line
    assert "DeliveryUnknownError" not in line
    assert len(proxy.heads) >= 2  # known not sent: tried again
    assert PROXY_PASSWORD not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("status", "wait", "operation", "requests"),
    [
        (b"503 Service Unavailable", "\xb2", ("HasBeenVerified", "RequestId=7"), 4),
        (
            b"503 Service Unavailable",
            "Wed, 21 Oct 99999999999 07:28:00 GMT",
            ("HasBeenVerified", "RequestId=7"),
            4,
        ),
        (
            b"429 Too Many Requests",
            "999999999",
            ("SendRequestViaSms", "PhoneNumber=5125550100", "ConfirmationQuestion=Is this you?"),
            1,
        ),
    ],
)
def test_the_cli_meeting_a_hostile_retry_after_exits_1_not_70(
    status: bytes, wait: str, operation: tuple[str, ...], requests: int
) -> None:
    server = Scripted(asking(status, wait))
    with served_in_thread(server) as port:
        result = run_cli("call", *operation, base_url=f"http://127.0.0.1:{port}")
    assert result.returncode == 1, result.stderr
    assert f"HTTP {status[:3].decode()}" in one_line(result)
    assert server.requests == requests


def test_a_bulk_job_held_by_a_huge_retry_after_stops_on_ctrl_c_with_every_row_queued(
    tmp_path: Path,
) -> None:
    import signal
    import threading

    from test_bulk_cli import Job, finish

    refused = threading.Event()

    class Refusing(Scripted):
        async def __call__(self, stream: anyio.abc.ByteStream) -> None:
            wire = Wire(stream)
            while await wire.request() is not None:
                self.requests += 1
                await stream.send(self.answers[0])
                refused.set()

    server = Refusing(asking(b"429 Too Many Requests", "999999999"))
    with served_in_thread(server) as port:
        phones = [f"51255501{n:02d}" for n in range(6)]
        job = Job(tmp_path, f"http://127.0.0.1:{port}", phones, "soap11")
        process = job.start("--concurrency", "2")
        assert refused.wait(timeout=60), "no SMS request reached the service"
        # Held now (nothing may leave for 999999999 s): a Ctrl-C ends the run at once.
        process.send_signal(signal.SIGINT)
        finish(process, 130)
    states = job.states()
    # Refused, not processed: every row queued for a later run; none failed, unknown or lost.
    assert sorted(state for state, _ in states.values()) == ["queued"] * len(phones)
    assert server.requests <= 2  # the concurrency: what left before the first 429 came back


@pytest.mark.parametrize("script", [never_answers, established_with_garbage])
def test_a_bulk_job_behind_a_proxy_that_never_opens_the_tunnel_exits_1_every_row_queued(
    tmp_path: Path, script: ProxyScript
) -> None:
    from test_bulk_cli import Job, finish

    proxy = ScriptedProxy(script)
    with served_in_thread(proxy) as port:
        phones = [f"51255502{n:02d}" for n in range(4)]
        job = Job(tmp_path, f"https://{SERVICE}:1", phones, "soap11")
        job.env["VERIF_PROXY"] = proxy_url(port)
        message = finish(job.start("--concurrency", "2", "--timeout", "0.5"), 1)
    assert "could not be reached before any SMS was sent" in message
    assert f"http://127.0.0.1:{port}" in message
    assert PROXY_PASSWORD not in message
    states = job.states()
    assert sorted(state for state, _ in states.values()) == ["queued"] * len(phones)
