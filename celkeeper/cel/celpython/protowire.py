"""A minimal protocol-buffers wire-format reader and writer (no generated classes needed).

Only what `celkeeper.cel.celpython.ast` needs to read and write `cel.expr.CheckedExpr`: varints, 64-bit
fixed values and length-delimited fields.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

VARINT = 0
FIXED64 = 1
LENGTH = 2
FIXED32 = 5

_MASK64 = (1 << 64) - 1


class WireError(ValueError):
    """Malformed protocol-buffers data."""


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise WireError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise WireError("varint too long")


def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for each field of one message, in order.

    Varints and fixed values are returned as unsigned ints; length-delimited ones as bytes.
    """
    pos = 0
    end = len(data)
    while pos < end:
        key, pos = read_varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == VARINT:
            value, pos = read_varint(data, pos)
        elif wire == FIXED64:
            value = int.from_bytes(data[pos : pos + 8], "little")
            pos += 8
        elif wire == LENGTH:
            size, pos = read_varint(data, pos)
            value = data[pos : pos + size]
            if len(value) != size:
                raise WireError("truncated field")
            pos += size
        elif wire == FIXED32:
            value = int.from_bytes(data[pos : pos + 4], "little")
            pos += 4
        else:
            raise WireError(f"unsupported wire type {wire}")
        yield number, wire, value


def as_bytes(value: int | bytes) -> bytes:
    """A length-delimited field's value; WireError when the field holds a number."""
    if isinstance(value, bytes):
        return value
    raise WireError("a length-delimited field was expected, not a number")


def as_uint(value: int | bytes) -> int:
    """A varint or fixed field's value; WireError when the field is length-delimited."""
    if isinstance(value, int):
        return value
    raise WireError("a number was expected, not a length-delimited field")


def as_int64(value: int) -> int:
    """A varint read as a signed 64-bit integer (two's complement)."""
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def as_double(value: int) -> float:
    return float(struct.unpack("<d", value.to_bytes(8, "little"))[0])


_ONE_BYTE = [bytes([i]) for i in range(128)]
_KEYS: dict[tuple[int, int], bytes] = {}


def encode_varint(value: int) -> bytes:
    value &= _MASK64
    if value < 128:
        return _ONE_BYTE[value]
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    key = _KEYS.get((number, wire))
    if key is None:
        key = _KEYS[(number, wire)] = encode_varint((number << 3) | wire)
    return key


class Writer:
    """Builds one message; nested messages are built with their own Writer."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def varint(self, number: int, value: int) -> None:
        self._parts += (_key(number, VARINT), encode_varint(value))

    def double(self, number: int, value: float) -> None:
        self._parts += (_key(number, FIXED64), struct.pack("<d", value))

    def bytes_(self, number: int, value: bytes) -> None:
        self._parts += (_key(number, LENGTH), encode_varint(len(value)), value)

    def string(self, number: int, value: str) -> None:
        self.bytes_(number, value.encode("utf-8"))

    def message(self, number: int, writer: Writer) -> None:
        self.bytes_(number, writer.getvalue())

    def getvalue(self) -> bytes:
        return b"".join(self._parts)
