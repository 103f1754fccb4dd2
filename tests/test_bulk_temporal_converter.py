"""The job's payload converter encodes and decodes exactly what the SDK's would, only at once."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

pytest.importorskip("temporalio")

import temporalio.converter

from verif_client.bulk import _workflows as w
from verif_client.bulk._temporal_converter import PayloadConverter, _decoder

SDK = temporalio.converter.DefaultPayloadConverter()
FAST = PayloadConverter()

POLLING = w.Polling(True, 60.0, "pending", 1.0, 2.0, 10.0, 0.1)
ROWS = [
    w.Row(2, None, "5550000001", "Pay $25?", "queued"),
    w.Row(3, "u-3", "5550000002", None, "verified", 41, 1.5, {"verified": True, "n": [1, 2]}),
]
SPEC = w.JobSpec("job", "digest", [2, 102], 200, POLLING, 60.0, "queue", "question", 25)
STATE = w.JobState(
    done={"b": {"verified": 3}}, next_slot=2.5, stopped="why", epoch=2,
    leases={"w1": w.Lease(1.5, 9.0, 1)}, loaded=True,
)  # fmt: skip

# Every dataclass the workflows and activities exchange, as their signatures type it.
CASES: list[tuple[Any, Any]] = [
    (ROWS, list[w.Row]),
    (SPEC, w.JobSpec),
    (STATE, w.JobState),
    (STATE, w.JobState | None),
    (None, w.JobState | None),
    (w.Batch("job", ROWS, POLLING, 60.0, "queue"), w.Batch),
    (w.Batch("job", ROWS, POLLING, 60.0, "queue", 25), w.Batch),
    (w.SendProgress([3, 4]), w.SendProgress),
    (w.SendRequest("job", [w.ToSend(2, "5550000001", "Pay?")]), w.SendRequest),
    (
        [w.SendOutcome(2, "sent", 41, 1.5), w.SendOutcome(3, "queued", stopped="no")],
        list[w.SendOutcome],
    ),
    ([w.Claimed(2, 41)], list[w.Claimed]),
    (w.AnswersRequest("job", [w.Awaited(2, 41, 1.5)], POLLING), w.AnswersRequest),
    ([w.Answer(2, "verified", {"verified": True})], list[w.Answer]),
    (w.Lease(0.5, 3.0), w.Lease),
    ({"verified": 3}, dict[str, int]),
    ({"41": 2}, dict[str, int]),
    (7, int),
    (1.5, float),
    ("text", str),
    (True, bool),
]  # fmt: skip


@pytest.mark.parametrize(("value", "hint"), CASES)
def test_decodes_as_the_sdk_does(value: Any, hint: Any) -> None:
    payloads = SDK.to_payloads([value])
    expected = SDK.from_payloads(payloads, [hint])
    got = FAST.from_payloads(payloads, [hint])
    assert got == expected == [value]
    assert type(got[0]) is type(expected[0])


@pytest.mark.parametrize(("value", "hint"), CASES)
def test_encodes_the_sdks_bytes(value: Any, hint: Any) -> None:
    (expected,) = SDK.to_payloads([value])
    (got,) = FAST.to_payloads([value])
    assert got == expected  # its metadata and its data, byte for byte
    assert FAST.from_payloads([got], [hint]) == [value]


def test_values_of_other_types_are_encoded_the_sdks_way() -> None:
    @dataclasses.dataclass
    class Elsewhere:
        when: datetime.datetime
        tags: frozenset[str]

    value = {"x": Elsewhere(datetime.datetime(2026, 11, 29, 10, 30), frozenset({"a"}))}
    assert FAST.to_payloads([value]) == SDK.to_payloads([value])
    with pytest.raises(TypeError):
        FAST.to_payloads([object()])


def test_every_type_of_the_workflows_has_its_own_decoder() -> None:
    # None would mean the SDK's slow walk for that type, silently.
    kinds = [
        kind
        for kind in vars(w).values()
        if isinstance(kind, type)
        and dataclasses.is_dataclass(kind)
        and kind.__module__ == w.__name__
    ]
    assert len(kinds) == 14
    for kind in kinds:
        assert _decoder(kind) is not None, kind


def test_a_whole_number_in_a_float_field_is_a_float() -> None:
    payloads = SDK.to_payloads([{"share": 1, "until": 2}])
    (lease,) = FAST.from_payloads(payloads, [w.Lease])
    assert lease == w.Lease(1.0, 2.0)
    assert isinstance(lease.share, float)


def test_fields_a_later_version_adds_are_left_out() -> None:
    newer = {**dataclasses.asdict(w.Claimed(2, 41)), "shard": 3}
    (claimed,) = FAST.from_payloads(SDK.to_payloads([newer]), [w.Claimed])
    assert claimed == w.Claimed(2, 41)


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ({"line": "2", "request_id": 41}, w.Claimed),  # a string for an int
        ({"share": "fast", "until": 1}, w.Lease),
        ([1], w.Claimed),
        ({"line": 2}, list[w.Claimed]),
        ({"line": 2}, w.Claimed),  # a field missing
    ],
)
def test_a_payload_of_the_wrong_shape_is_refused(value: Any, hint: Any) -> None:
    payloads = SDK.to_payloads([value])
    with pytest.raises(TypeError):
        SDK.from_payloads(payloads, [hint])
    with pytest.raises(TypeError):
        FAST.from_payloads(payloads, [hint])


def test_a_flag_is_no_count() -> None:
    # Stricter than the SDK, which takes True for 1: no payload of ours has one.
    payloads = SDK.to_payloads([{"line": True, "request_id": 41}])
    with pytest.raises(TypeError):
        FAST.from_payloads(payloads, [w.Claimed])


def test_types_it_does_not_know_go_the_sdks_way() -> None:
    moment = datetime.datetime(2026, 11, 29, 1, 30, tzinfo=datetime.UTC)

    @dataclasses.dataclass
    class Elsewhere:
        at: datetime.datetime

    payloads = SDK.to_payloads([Elsewhere(moment)])
    assert FAST.from_payloads(payloads, [Elsewhere]) == [Elsewhere(moment)]
    assert FAST.from_payloads(SDK.to_payloads([moment]), [datetime.datetime]) == [moment]


def test_garbage_is_a_parse_failure() -> None:
    (payload,) = SDK.to_payloads([{"line": 2}])
    payload.data = b"{not json"
    for converter in (SDK, FAST):
        with pytest.raises(RuntimeError, match="could not be converted") as raised:
            converter.from_payloads([payload], [w.Claimed])
        assert "Failed parsing" in str(raised.value.__cause__)
