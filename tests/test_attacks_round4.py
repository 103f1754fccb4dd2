"""Issue 39, part 4: the promises about proxies, client certificates and
Retry-After (README.md, SECURITY.md, docs/client.md, docs/bulk.md), each
attacked from outside by a peer of the test's own on loopback.

Every call runs under a ``fail_after`` guard far above its deadline: a guard
that fires is a call that would never have ended. No timing is asserted.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc
import pytest
from proxysupport import (
    without_proxy_variables,
)
from relsupport import PASSWORD, USER, WITH_UVLOOP
from test_retry_after import Scripted, http_date
from test_transport_bad_peers import (
    GUARD,
    NOT_VERIFIED,
    SMS_SENT,
    Wire,
    http_response,
    raw_server,
    send_sms,
)

import verif_client as vc
from verif_client._retry import retry_after

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
