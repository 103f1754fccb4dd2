"""The job's own Temporal payloads without the SDK's per-value type walk.

The SDK turns each JSON payload into the type a workflow or activity asks for
with ``value_to_type``, which calls ``typing.get_type_hints`` on every
dataclass it meets, for every value. A worker decodes every row several times
(a batch's input, each send and answers activity, each batch's result at the
job's end), and with a job's rows that walk was most of a worker's CPU. Here the
decoder for each type is built once and kept; it yields exactly what the SDK's
would for the job's own dataclasses, and any other type goes the SDK's way.
Encoding writes the same bytes as the SDK's, without its deep copy of each
dataclass into a dict first.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Callable
from typing import Any, Final

import temporalio.api.common.v1
import temporalio.converter

from . import _workflows

_Decode = Callable[[Any], Any]


def _checked(kind: type) -> _Decode:
    def decode(value: Any) -> Any:
        # bool is an int to isinstance: a flag is no count.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return decode


def _real(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def _any(value: Any) -> Any:
    return value


def _optional(decode: _Decode) -> _Decode:
    def optional(value: Any) -> Any:
        return None if value is None else decode(value)

    return optional


def _list_of(decode: _Decode) -> _Decode:
    def decode_list(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        return [decode(item) for item in value]

    return decode_list


def _dict_of(decode: _Decode) -> _Decode:
    def decode_dict(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object, got {type(value).__name__}")
        return {key: decode(item) for key, item in value.items()}

    return decode_dict


def _dataclass(cls: type) -> _Decode | None:
    hints = typing.get_type_hints(cls)
    fields: list[tuple[str, _Decode]] = []
    for field in dataclasses.fields(cls):
        if field.init:
            decoder = _decoder(hints[field.name])
            if decoder is None:
                return None  # a field only the SDK can decode: the SDK decodes it all
            fields.append((field.name, decoder))

    def decode(value: Any) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object for {cls.__name__}, got {type(value).__name__}")
        # Fields a later version added are left out, as the SDK does; a field
        # missing is the constructor's to refuse (or to default).
        return cls(**{name: field(value[name]) for name, field in fields if name in value})

    return decode


@functools.cache
def _decoder(hint: Any) -> _Decode | None:
    """The decoder of ``hint``, or None where the SDK's own is needed."""
    if hint is Any:
        return _any
    if hint in (str, int, bool):
        return _checked(hint)
    if hint is float:
        return _real
    if dataclasses.is_dataclass(hint) and getattr(hint, "__module__", "") == _workflows.__name__:
        return _dataclass(typing.cast(type, hint))
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list and len(args) == 1:
        item = _decoder(args[0])
        return None if item is None else _list_of(item)
    if origin is dict and len(args) == 2 and args[0] is str:
        item = _decoder(args[1])
        return None if item is None else _dict_of(item)
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        (other,) = (arg for arg in args if arg is not type(None))
        item = _decoder(other)
        return None if item is None else _optional(item)
    return None


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(cls))


_SDK_DEFAULT: Final = temporalio.converter.AdvancedJSONEncoder().default


def _plain(value: Any) -> Any:
    """What ``json`` cannot write itself, as the SDK's encoder has it: the
    job's dataclasses field by field, without ``dataclasses.asdict``'s deep
    copy of every value (a worker's results are lists of them, one a row)."""
    cls = type(value)
    if cls.__module__ == _workflows.__name__ and dataclasses.is_dataclass(cls):
        return {name: getattr(value, name) for name in _field_names(cls)}
    return _SDK_DEFAULT(value)


class _JSONPlain(temporalio.converter.JSONPlainPayloadConverter):
    def to_payload(self, value: Any) -> temporalio.api.common.v1.Payload | None:
        # The same bytes as the SDK's (sorted keys, no spaces).
        return temporalio.api.common.v1.Payload(
            metadata={"encoding": b"json/plain"},
            data=json.dumps(value, default=_plain, separators=(",", ":"), sort_keys=True).encode(),
        )

    def from_payload(
        self, payload: temporalio.api.common.v1.Payload, type_hint: type | None = None
    ) -> Any:
        decode = _decoder(type_hint) if type_hint is not None else None
        if decode is None:
            return super().from_payload(payload, type_hint)
        try:
            return decode(json.loads(payload.data))
        except json.JSONDecodeError as err:
            raise RuntimeError("Failed parsing") from err


class PayloadConverter(temporalio.converter.CompositePayloadConverter):
    """The SDK's default converters, its JSON one encoding and decoding the job's types at once."""

    def __init__(self) -> None:
        defaults = temporalio.converter.DefaultPayloadConverter.default_encoding_payload_converters
        super().__init__(
            *(
                _JSONPlain()
                if isinstance(converter, temporalio.converter.JSONPlainPayloadConverter)
                else converter
                for converter in defaults
            )
        )
