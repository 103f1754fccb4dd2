"""The client's options object (``_options.ClientOptions``): every check in one place.

The client-level behaviour is in test_options_checked.py; these pin what the
options object itself promises: which option a refusal names when several are
wrong, and that nothing it holds leaks through its repr."""

from __future__ import annotations

import pytest

from verif_client._options import ClientOptions


def test_the_numbers_are_checked_first_in_field_order() -> None:
    # Two wrong values and a contradiction: the first field's is the one named.
    with pytest.raises(ValueError, match=r"^timeout must be a number > 0, got -1$"):
        ClientOptions(
            base_url="not a url?q",
            timeout=-1,
            max_connections=0,
            rate_limit=1.0,
            rate_limiter=object(),  # type: ignore[arg-type]
        )
    with pytest.raises(ValueError, match=r"^max_connections must be an integer >= 1, got 0$"):
        ClientOptions(base_url="https://example.com", max_connections=0)


def test_contradictions_are_refused_before_the_address_is_read() -> None:
    with pytest.raises(ValueError, match="either rate_limit or rate_limiter"):
        ClientOptions(
            base_url="http://user:pw@example.com",  # refused too, but later
            rate_limit=1.0,
            rate_limiter=object(),  # type: ignore[arg-type]
        )


def test_the_repr_shows_no_secret() -> None:
    options = ClientOptions(
        base_url="https://urluser:urlsecret@example.com/",
        username="user",
        password="hunter2",
        trust_env=False,
    )
    assert repr(options) == "<ClientOptions https://example.com binding=soap11>"
    assert options.connect_url == "https://urluser:urlsecret@example.com"
    assert options.scrub.text("hunter2 urlsecret") == "*** ***"
