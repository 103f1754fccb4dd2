"""Option values are checked when the client is built, not when a call fails.

``timeout=-5`` or ``nan``, ``rate_limit=nan`` (which meant "no limit"),
``max_connections=nan`` and a negative ``max_response_bytes`` used to be taken
and fail late with another library's error, or quietly do something else.
"""

from __future__ import annotations

import math

import pytest

import verif_client as vc

NAN, INF = math.nan, math.inf

BAD = [
    ("timeout", -5),
    ("timeout", 0),
    ("timeout", NAN),
    ("timeout", "30"),
    ("rate_limit", NAN),
    ("rate_limit", -1.0),
    ("rate_limit", 0),
    ("max_connections", NAN),
    ("max_connections", 0),
    ("max_connections", 2.5),
    ("max_connections", True),
    ("max_response_bytes", -1),
    ("max_response_bytes", 0),
    ("max_response_bytes", NAN),
]


@pytest.mark.parametrize("client_class", [vc.VerificationClient, vc.SyncVerificationClient])
@pytest.mark.parametrize(("option", "value"), BAD, ids=[f"{o}={v!r}" for o, v in BAD])
def test_a_bad_option_value_is_refused_naming_the_option(
    client_class: type, option: str, value: object
) -> None:
    with pytest.raises(ValueError, match=rf"^{option} must be") as caught:
        client_class("http://127.0.0.1:9", **{option: value})
    assert repr(value) in str(caught.value)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("timeout", 0.001),
        ("timeout", INF),
        ("rate_limit", 0.5),
        ("rate_limit", INF),
        ("max_connections", 1),
        ("max_response_bytes", 1),
    ],
)
def test_good_values_at_the_edges_are_taken(option: str, value: object) -> None:
    client = vc.VerificationClient("http://127.0.0.1:9", **{option: value})
    assert getattr(client, option) == value


@pytest.mark.parametrize(
    ("policy", "option"),
    [
        (vc.RetryPolicy, "deadline"),
        (vc.RetryPolicy, "max_backoff"),
        (vc.PollPolicy, "timeout"),
        (vc.PollPolicy, "max_delay"),
    ],
)
def test_policies_refuse_nan_and_negative_values(policy: type, option: str) -> None:
    for value in (NAN, -1.0):
        with pytest.raises(ValueError, match=option):
            policy(**{option: value})
