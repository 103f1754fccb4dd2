"""An answer's headers as the codec takes them, decoded when first looked at."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload


class Headers(Sequence[tuple[str, str]]):
    """An answer's headers as the codec takes them (str pairs), decoded when
    first looked at: an answer the client has decoded before (its answer
    cache, which most polls hit) never is."""

    __slots__ = ("_decoded", "_raw")

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self._raw = raw
        self._decoded: list[tuple[str, str]] | None = None

    def _items(self) -> list[tuple[str, str]]:
        decoded = self._decoded
        if decoded is None:
            decoded = self._decoded = [
                (name.decode("latin-1"), value.decode("latin-1")) for name, value in self._raw
            ]
        return decoded

    @overload
    def __getitem__(self, index: int) -> tuple[str, str]: ...
    @overload
    def __getitem__(self, index: slice) -> list[tuple[str, str]]: ...
    def __getitem__(self, index: int | slice) -> tuple[str, str] | list[tuple[str, str]]:
        return self._items()[index]

    def __len__(self) -> int:
        return len(self._raw)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._items())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            other = other._items()
        return isinstance(other, list | tuple) and self._items() == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._items())
