"""Answers that repeat are decoded once; every call still gets its own answer.

The client keeps the decoded result of a small answer it has seen twice (see
verif_client/_answercache.py). These tests attack that from outside: a peer
whose answers change, a peer that makes every answer different, an answer
the client refuses, an answer that echoes the password. Each runs against a
peer of its own on loopback, through the client's own connection pool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from relsupport import ASGIApp, drain

import verif_client as vc
from verif_client._answercache import MISSING, AnswerCache
from verif_client.simulator import Script, Simulator, SimulatorConfig, serve

NS = "http://api.giact.com/verificationservices/v5"
OP = "SecureLink_SecurityCode_HasBeenVerified"
PASSWORD = "tester-password"


def envelope(result: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/">'
        f'<soap:Body><{OP}Response xmlns="{NS}"><{OP}Result>{result}</{OP}Result>'
        f"</{OP}Response></soap:Body></soap:Envelope>"
    ).encode()


def answering(next_body: Callable[[], bytes]) -> ASGIApp:
    """A peer answering each request with the next body it is given."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await drain(receive)
        headers = [(b"content-type", b"text/xml; charset=utf-8")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": next_body()})

    return app


def client_for(base_url: str) -> vc.VerificationClient:
    retry = vc.RetryPolicy(attempts=1)
    return vc.VerificationClient(base_url, username="tester", password=PASSWORD, retry=retry)


@pytest.mark.anyio
async def test_an_answer_that_changes_is_read_as_it_changes() -> None:
    # Pending (nil) many times over, then verified: the repeated nil is the
    # answer a cache would keep, and the change must still come through.
    sim = Simulator(config=SimulatorConfig(script=Script.manual()))
    async with serve(sim) as server, client_for(server.base_url) as client:
        sent = await client.send_confirmation_sms("5551234567", "Did you ask to pay?")
        pending = [await client.has_been_verified(sent.request_id) for _ in range(5)]
        sim.verify(sent.request_id)
        verified = [await client.has_been_verified(sent.request_id) for _ in range(3)]
    assert pending == [vc.VerificationResult(None)] * 5
    assert verified == [vc.VerificationResult(True)] * 3


@pytest.mark.anyio
async def test_every_call_gets_its_own_answer_from_a_peer_whose_answers_all_differ() -> None:
    # 600 different answers, each served three times in a row, then all of
    # them again: far more than any cache keeps, so what is kept is pushed
    # out and taken in again; not one call may get another call's result.
    rounds = [n for n in range(600) for _ in range(3)] * 2
    served = iter(rounds)

    def next_body() -> bytes:
        return envelope(
            f"<Verified>false</Verified><ErrorMessage>answer {next(served)}</ErrorMessage>"
        )

    async with serve(answering(next_body)) as server, client_for(server.base_url) as client:
        messages = [(await client.has_been_verified(7)).error_message for _ in rounds]
    assert messages == [f"answer {n}" for n in rounds]


@pytest.mark.anyio
async def test_an_answer_refused_is_refused_every_time_it_comes() -> None:
    # The same bad body (the result element twice) three times: three errors,
    # never a result remembered from an earlier, good answer of the same shape.
    good = envelope("<Verified>true</Verified>")
    bad = envelope("<Verified>true</Verified><Verified>false</Verified>")
    bodies = iter([good, good, good, bad, bad, bad, good])
    async with serve(answering(lambda: next(bodies))) as server, client_for(server.base_url) as c:
        first = [await c.has_been_verified(7) for _ in range(3)]
        for _ in range(3):
            with pytest.raises(vc.DecodeError, match="more than once"):
                await c.has_been_verified(7)
        last = await c.has_been_verified(7)
    assert first == [vc.VerificationResult(True)] * 3
    assert last == vc.VerificationResult(True)


@pytest.mark.anyio
async def test_a_repeated_echo_of_the_password_is_masked_every_time() -> None:
    echo = envelope(f"<Verified>false</Verified><ErrorMessage>bad {PASSWORD}</ErrorMessage>")
    async with serve(answering(lambda: echo)) as server, client_for(server.base_url) as client:
        results = [await client.has_been_verified(7) for _ in range(4)]
    assert {result.error_message for result in results} == {"bad ***"}


def test_what_is_kept_is_bounded_and_answers_seen_once_push_nothing_out() -> None:
    cache = AnswerCache()
    repeating = ("codec", OP, b"<nil/>")
    cache.put(repeating, "pending")
    assert cache.get(repeating) is MISSING  # seen once: not kept yet
    cache.put(repeating, "pending")
    assert cache.get(repeating) == "pending"
    # A flood of answers that never repeat (a send's, each with a new id).
    for n in range(10_000):
        cache.put(("codec", "Send", b"%d" % n), n)
    assert cache.get(repeating) == "pending"
    # A flood of answers that all repeat: kept up to the bound, oldest out first.
    for n in range(1_000):
        key = ("codec", OP, b"%d" % n)
        cache.put(key, n)
        cache.put(key, n)
    assert len(cache) == 64
    assert cache.get(("codec", OP, b"999")) == 999
    assert cache.get(repeating) is MISSING
