"""An answer whose bytes are those of the connection's last whole one is
taken again without parsing (``_Attempt.feed``, ``Reader.replay``), and
means exactly what parsing it would: the same answer, the same refusal, the
same verdict on the connection. Requests of a polled operation are prebuilt
with the id spliced in (``_spliced``): byte for byte what encoding writes."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from test_transport_parsers import ANSWERS, OK

from verif_client import Binding, ResponseTooLargeError
from verif_client._bindings import codec_for
from verif_client._codec import Credentials
from verif_client._operations import GET_MOBILE_LOCATION, HAS_BEEN_VERIFIED
from verif_client._transport import _parse, _pool
from verif_client._xsd import LONG_MAX

pytest.importorskip("httptools")


class _Counting:
    """httptools' parser, counting what it is fed."""

    def __init__(self, parser: Any) -> None:
        self.parser = parser
        self.fed = 0

    def feed_data(self, data: bytes) -> None:
        self.fed += 1
        self.parser.feed_data(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.parser, name)


@pytest.fixture
def connection(monkeypatch: pytest.MonkeyPatch) -> Iterator[_pool._Connection]:
    monkeypatch.setattr(_parse, "READER", _parse.LlhttpAnswer)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        made = _pool._Connection(None, None, ours.fileno(), tls=False)
        answer = made.answer
        assert isinstance(answer, _parse.LlhttpAnswer)
        answer._parser = _Counting(answer._parser)
        yield made


def _read(connection: _pool._Connection, *reads: bytes, cap: int = 1000) -> Any:
    attempt = _pool._Attempt()
    attempt.read_on(connection, cap, "Op")
    connection.answer.start("POST")
    whole = None
    for data in reads:
        whole = attempt.feed(data)
    return whole


def _fed(connection: _pool._Connection) -> int:
    parser = connection.answer._parser  # type: ignore[attr-defined]
    assert isinstance(parser, _Counting)
    return parser.fed


def test_the_same_bytes_again_are_the_same_answer_unparsed(
    connection: _pool._Connection,
) -> None:
    first = _read(connection, OK)
    assert first[0] == 200
    assert first[2] == b"hello"
    assert connection.answer.reusable()
    assert _fed(connection) == 1
    again = _read(connection, OK)
    assert again is first  # the same body object: its hash is kept for the answer cache
    assert connection.answer.reusable()
    assert _fed(connection) == 1


@pytest.mark.parametrize(
    "other",
    [
        OK.replace(b"hello", b"howdy"),  # another answer
        OK + b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",  # bytes after it
        OK.replace(b"Content-Type", b"Connection: close\r\nContent-Type"),
    ],
)
def test_other_bytes_are_parsed(connection: _pool._Connection, other: bytes) -> None:
    _read(connection, OK)
    fresh = _read(connection, other)
    assert _fed(connection) == 2
    if other.startswith(OK) or b"close" in other:
        assert not connection.answer.reusable()
    else:
        assert fresh[2] == b"howdy"
        assert connection.answer.reusable()


def test_a_smaller_cap_reads_it_again_and_refuses(connection: _pool._Connection) -> None:
    _read(connection, OK)
    with pytest.raises(ResponseTooLargeError):
        _read(connection, OK, cap=3)


def test_only_an_answer_whole_in_one_read_is_replayed(connection: _pool._Connection) -> None:
    _read(connection, OK[:20], OK[20:])
    assert connection.replay is None
    _read(connection, OK)
    assert connection.replay is not None
    # Its first read alone is not the answer: parsed, and awaited for the rest.
    assert _read(connection, OK[:20]) is None
    assert _fed(connection) == 4


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_replaying_means_what_parsing_means(connection: _pool._Connection, name: str) -> None:
    """Every answer of the parsers' table, after an OK, read twice: the second
    read (replayed, if ever) gives what the first gave."""

    def outcome() -> tuple[object, bool]:
        try:
            got: object = _read(connection, ANSWERS[name])
        except Exception as exc:
            got = type(exc)
        reusable = connection.answer.reusable()
        return (None if got is None else got if isinstance(got, type) else (got[0], got[2])), (
            reusable
        )

    _read(connection, OK)
    first = outcome()
    if not first[1]:
        return  # the connection is retired: never read again
    assert outcome() == first


def test_h11_never_replays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parse, "READER", _parse.H11Answer)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        connection = _pool._Connection(None, None, ours.fileno(), tls=False)
        _read(connection, OK)
        assert connection.answer.reusable()
        assert connection.replay is None


@pytest.mark.parametrize("binding", list(Binding))
@pytest.mark.parametrize("op", [HAS_BEEN_VERIFIED, GET_MOBILE_LOCATION])
@pytest.mark.parametrize(
    "base_url", ["http://localhost:8080/svc", "http://u:p%25@h/", "https://x/"]
)
def test_spliced_requests_are_the_encoded_ones(binding: Binding, op: Any, base_url: str) -> None:
    codec = codec_for(binding)
    pool = _pool.ConnectionPool(base_url)
    credentials = Credentials("user", "p%s<&>%d")
    (name,) = op.param_names
    requests = pool.id_requests(
        lambda mark: codec.encode(op, {name: mark}, credentials=credentials)
    )
    if binding is Binding.HTTP_GET:
        assert requests is None  # the id is in the path
        return
    assert requests is not None
    for request_id in (0, 7, 10, 99, 123_456_789, LONG_MAX):
        encoded = codec.encode(op, {name: request_id}, credentials=credentials)
        assert requests.render(request_id) == pool._heads.request_bytes(_parse.H11Answer(), encoded)
    for other in (-1, True, LONG_MAX + 1, "1", 1.0):
        assert requests.render(other) is None  # encoded as ever, with its checks


def test_a_poll_run_follows_a_change_of_binding() -> None:
    """The prebuilt requests are the codec's they were made with: a client
    whose binding changes mid-run writes the new binding's requests."""
    from verif_client import VerificationClient

    client = VerificationClient("http://localhost:8080/svc", username="u", password="p")
    pool = _pool.ConnectionPool("http://localhost:8080/svc")
    calls = client._calls_at_once()
    assert calls is not None
    (name,) = HAS_BEEN_VERIFIED.param_names
    for binding in (Binding.SOAP11, Binding.SOAP12, Binding.HTTP_GET, Binding.SOAP11):
        codec = client.codec(binding)
        made = calls._request(pool, codec, HAS_BEEN_VERIFIED, 42)
        encoded = codec.encode(HAS_BEEN_VERIFIED, {name: 42}, credentials=client._credentials)
        if isinstance(made, bytes):
            assert made == pool._heads.request_bytes(_parse.H11Answer(), encoded)
        else:
            assert binding is Binding.HTTP_GET
            assert made == encoded
