"""Fuzzing through the whole client: a loopback peer sends mutated answers.

Whatever arrives, only `VerifClientError` subclasses reach the caller, no call
hangs, and in the polling API every id still gets exactly one outcome.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio
import asmx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from relsupport import ARGS, PASSWORD, USER, drain

import verif_client as vc
from verif_client.simulator import serve_in_thread

pytestmark = pytest.mark.anyio

FUZZ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
RETRY = vc.RetryPolicy(attempts=2, initial_backoff=0.001, max_backoff=0.001, deadline=5)
CONTENT = {
    "SecureLink_Confirmation_SendRequestViaSms": (
        "<SecureLinkRequestId>4294967297</SecureLinkRequestId><ErrorMessage />"
    ),
    "SecureLink_SecurityCode_HasBeenVerified": (
        '<Verified xsi:nil="true" /><ErrorMessage>pending &amp; more</ErrorMessage>'
    ),
    "SecureLink_MobileLocation_GetResult": (
        "<LocationResult><Latitude>30.2</Latitude><Longitude>-97.7</Longitude>"
        "<AccuracyRadius>1e-05</AccuracyRadius><Address>1 Main &amp; 2nd</Address>"
        "<Distance>12</Distance></LocationResult>"
    ),
    "UpdatePrivateBadCheckRejectReason": "true",
    "RevokeMobileConsent": "false",
    "GetMobileConsentText": "By answering \u201cYes\u201d &amp; more \U0001f4f1",
}
CONTENT_TYPES = [b"text/xml; charset=utf-8", b"application/soap+xml", b"text/html", b""]


class Peer:
    """Answers each request with the next of ``answers`` (status, content type, body)."""

    def __init__(self) -> None:
        self.answers: Iterator[tuple[int, bytes, bytes]] = iter(())

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await drain(receive)
        status, content_type, body = next(self.answers)
        headers = [(b"content-length", b"%d" % len(body))]
        if content_type:
            headers.append((b"content-type", content_type))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def peer() -> Iterator[tuple[Peer, str]]:
    answering = Peer()
    with serve_in_thread(answering) as server:
        yield answering, server.base_url


@st.composite
def mutated(draw: st.DrawFn, op: vc.Operation, binding: vc.Binding) -> bytes:
    """A valid answer for ``op`` with a few bytes deleted, inserted or replaced,
    or cut short; sometimes random bytes instead."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=300))
    body = bytearray(asmx.response(binding, op, CONTENT[op.name]))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(body)))
        kind = draw(st.sampled_from(["delete", "insert", "replace", "truncate"]))
        piece = draw(st.binary(min_size=1, max_size=8) | st.sampled_from(TOKENS))
        if kind == "delete":
            del body[at : at + len(piece)]
        elif kind == "insert":
            body[at:at] = piece
        elif kind == "replace":
            body[at : at + len(piece)] = piece
        else:
            del body[at:]
    return bytes(body)


TOKENS = [
    b"<",
    b">",
    b"&",
    b"&#0;",
    b"&#xD800;",
    b"]]>",
    b"<![CDATA[",
    b'xsi:nil="true"',
    b"\xff",
    b"\xc3",
    b"<x>",
    b"</soap:Body>",
    b"<!DOCTYPE a>",
    b"<?pi?>",
    b"<!--",
    b"-1",
    b"9" * 30,
]


@FUZZ
@given(data=st.data())
async def test_mutated_answers_only_raise_library_errors(
    peer: tuple[Peer, str], data: st.DataObject
) -> None:
    answering, base_url = peer
    op = data.draw(st.sampled_from(vc.OPERATIONS), label="operation")
    binding = data.draw(st.sampled_from(list(vc.Binding)), label="binding")
    body = data.draw(mutated(op, binding), label="body")
    status = data.draw(st.sampled_from([200, 200, 200, 500, 400, 503]), label="status")
    content_type = data.draw(st.sampled_from(CONTENT_TYPES), label="content type")
    answering.answers = itertools.repeat((status, content_type, body))
    async with vc.VerificationClient(
        base_url, username=USER, password=PASSWORD, binding=binding, retry=RETRY
    ) as client:
        with anyio.fail_after(30), contextlib.suppress(vc.VerifClientError):
            await client.call_with(op, ARGS[op.name])


@settings(FUZZ, max_examples=15)
@given(data=st.data())
async def test_polling_through_mutated_answers_settles_every_id_once(
    peer: tuple[Peer, str], data: st.DataObject
) -> None:
    answering, base_url = peer
    op = vc.get_operation("SecureLink_SecurityCode_HasBeenVerified")
    binding = data.draw(st.sampled_from(list(vc.Binding)), label="binding")
    bodies = data.draw(st.lists(mutated(op, binding), min_size=1, max_size=6), label="bodies")
    statuses = data.draw(st.lists(st.sampled_from([200, 200, 500, 503]), min_size=1, max_size=3))
    answering.answers = (
        (status, b"text/xml", body)
        for status, body in zip(itertools.cycle(statuses), itertools.cycle(bodies), strict=False)
    )
    ids = list(range(2**32 + 1, 2**32 + 41))
    policy = vc.PollPolicy(initial_delay=0.001, max_delay=0.005, timeout=0.3, retry=RETRY)
    seen: Counter[int] = Counter()
    async with vc.VerificationClient(
        base_url, username=USER, password=PASSWORD, binding=binding
    ) as client:
        with anyio.fail_after(60):
            async with client.poll_verifications(ids, policy=policy, max_concurrency=8) as stream:
                async for outcome in stream:
                    seen[outcome.request_id] += 1
                    assert outcome.error is None or isinstance(outcome.error, vc.VerifClientError)
    assert seen == Counter(ids)
