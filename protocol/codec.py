"""Msgpack encoding of wire messages and signed bodies, with explicit limits on everything decoded.

The wire form of a message is its fields as a msgpack map (tagged by `kind`); bytes stay msgpack bin,
enums travel as their string value, tuples as arrays. Map keys are sorted at every level, so equal values
always encode to the same bytes (signed bodies rely on that). No ext types exist on this wire.

Decoding is the one door untrusted bytes come through: any undecodable, oversized or invalid input
raises `RemoteProtocolError` and nothing else.
"""

from __future__ import annotations

import enum
from typing import Final, TypeVar, cast

import msgpack  # untyped: pyproject's mypy overrides ignore its missing stubs
from pydantic import ValidationError

from protocol.base import Value, field_problems
from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.messages import MESSAGE_ADAPTER, Message
from protocol.values import MAX_SAMPLES

T = TypeVar("T", bound=Value)

MAX_STR_LEN: Final = 64 << 10
"""Longest string accepted (ids are <= 128 chars, details <= 2000, URLs and addresses short)."""
MAX_BIN_LEN: Final = 4 << 20
"""Longest byte string accepted (a blob chunk; an envelope payload is <= `MAX_ENVELOPE`)."""
MAX_ARRAY_LEN: Final = MAX_SAMPLES
"""Longest array accepted (raw latency samples: up to `MAX_SAMPLES` timed runs per task)."""
MAX_MAP_LEN: Final = 1024
"""Largest map accepted (messages have < 40 fields; per-op or per-runtime tables stay small)."""

_Plain = None | bool | int | float | str | bytes | list["_Plain"] | dict[str, "_Plain"]


def _reject_ext(code: int, data: bytes) -> object:
    raise ValueError(f"msgpack ext type {code} is not allowed")


_LEAVES: Final = frozenset({type(None), bool, int, float, str, bytes})
"""The types msgpack takes as they are, exactly (a subclass, an `IntEnum` say, takes `_plain`'s way)."""


def _plain(value: object) -> _Plain:
    """Turn a model dump into msgpack-ready data: enums to values, tuples to lists, keys sorted.

    A container's leaves are taken as they are, without a call each: a result's token times and raw
    samples are arrays of up to `MAX_SAMPLES` floats, and a call per float was most of what encoding a
    generation result cost (`tests/unit/protocol/test_codec.py` counts the calls)."""
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return value
    # a member whose type is exactly a leaf's is taken as it is; anything else (an enum, an `IntEnum`
    # whose type is a subclass of int, a container) goes through `_plain`
    if isinstance(value, dict):
        return cast(_Plain, {str(k): v if type(v) in _LEAVES else _plain(v) for k, v in _sorted(value)})
    if isinstance(value, list | tuple):
        return cast(_Plain, [v if type(v) in _LEAVES else _plain(v) for v in value])
    raise LocalProtocolError(f"cannot encode a {type(value).__name__}")


def _sorted(mapping: dict[object, object]) -> list[tuple[object, object]]:
    """A map's items in the order of their keys as strings (every level of the wire form is sorted)."""
    return sorted(mapping.items(), key=lambda item: str(item[0]))


def _pack(value: Value) -> bytes:
    try:
        packed = msgpack.packb(_plain(value.model_dump(mode="python")), use_bin_type=True)
    except (OverflowError, ValueError, TypeError) as exc:
        raise LocalProtocolError(f"cannot encode {type(value).__name__}: {exc}") from exc
    assert isinstance(packed, bytes)
    return packed


def _unpack(data: bytes) -> object:
    """Msgpack bytes to plain data under the limits; no container may announce more than the input holds."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise RemoteProtocolError(f"expected bytes, got {type(data).__name__}")
    size = len(data)
    try:
        return msgpack.unpackb(
            data,
            raw=False,
            use_list=True,
            strict_map_key=True,
            max_str_len=min(MAX_STR_LEN, size),
            max_bin_len=min(MAX_BIN_LEN, size),
            max_array_len=min(MAX_ARRAY_LEN, size),
            max_map_len=min(MAX_MAP_LEN, size // 2),
            max_ext_len=0,
            ext_hook=_reject_ext,
        )
    except (ValueError, TypeError, OverflowError, RecursionError, msgpack.UnpackException) as exc:
        raise RemoteProtocolError(f"undecodable msgpack: {type(exc).__name__}: {exc}") from exc


def _validation_detail(exc: ValidationError) -> str:
    problems = field_problems(exc, root="<root>") or [f"<root>: {exc}"]
    return f"{exc.error_count()} invalid field(s), first {problems[0]}"


def encode(message: Message) -> bytes:
    """Encode a wire message (tagged by its `kind`) as msgpack bytes.

    Args:
        message: any message of the sark protocols.

    Returns:
        The msgpack encoding, deterministic for equal messages.

    Raises:
        LocalProtocolError: the message holds something the wire cannot carry (an int beyond 64 bits).
    """
    return _pack(message)


def decode(data: bytes) -> Message:
    """Decode and validate one wire message.

    Args:
        data: one frame's payload, as received from a peer.

    Returns:
        The validated message.

    Raises:
        RemoteProtocolError: on any bad input whatsoever; nothing else is ever raised.
    """
    obj = _unpack(data)
    try:
        return MESSAGE_ADAPTER.validate_python(obj)
    except ValidationError as exc:
        raise RemoteProtocolError(f"invalid message: {_validation_detail(exc)}") from exc
    except (ValueError, TypeError, RecursionError) as exc:
        raise RemoteProtocolError(f"invalid message: {type(exc).__name__}: {exc}") from exc


def pack_body(body: Value) -> bytes:
    """Encode a body that gets signed (OfferBody, ResultBody, AdvertBody...) as canonical msgpack.

    Args:
        body: any frozen value.

    Returns:
        Canonical bytes: equal values give equal bytes (map keys sorted at every level).

    Raises:
        LocalProtocolError: the body holds something msgpack cannot carry.
    """
    return _pack(body)


def unpack_body(data: bytes, cls: type[T]) -> T:
    """Decode and validate a signed body of a known type.

    Args:
        data: the payload bytes of an envelope.
        cls: the value type the payload must hold.

    Returns:
        The validated body.

    Raises:
        RemoteProtocolError: on any bad input.
    """
    obj = _unpack(data)
    try:
        return cls.model_validate(obj)
    except ValidationError as exc:
        raise RemoteProtocolError(f"invalid {cls.__name__}: {_validation_detail(exc)}") from exc
    except (ValueError, TypeError, RecursionError) as exc:
        raise RemoteProtocolError(f"invalid {cls.__name__}: {type(exc).__name__}: {exc}") from exc
