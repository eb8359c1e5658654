"""cel-go values as plain Python data (the library encodes them as {"t": kind, "v": value}; see
celkeeper/native/go/k8scel/encode.go)."""

from __future__ import annotations

import base64
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from celkeeper.cel.api import CelError, LibraryValue, TypeValue
from celkeeper.cel.k8slib.celvalues import Uint

_DOUBLES = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf}


def _timestamp(text: str) -> datetime:
    # RFC 3339 with up to 9 fractional digits; Python keeps microseconds
    date, _, rest = text.partition("T")
    clock = rest.rstrip("Z")
    whole, _, fraction = clock.partition(".")
    micro = int((fraction + "000000")[:6]) if fraction else 0
    return datetime.fromisoformat(f"{date}T{whole}+00:00").replace(microsecond=micro, tzinfo=UTC)


def decode(encoded: dict[str, Any]) -> Any:
    """The Python value of an encoded CEL value: bool, int, Uint, float, str, bytes, None, list,
    dict, datetime (UTC), timedelta, TypeValue, LibraryValue (Kubernetes library values), or CelError
    (an error value or an optional, which has no Python form)."""
    kind, value = encoded["t"], encoded["v"]
    if kind in ("bool", "string"):
        return value
    if kind == "int":
        return int(value)
    if kind == "uint":
        return Uint(int(value))
    if kind == "double":
        return _DOUBLES.get(value) or float(value) if isinstance(value, str) else float(value)
    if kind == "null":
        return None
    if kind == "list":
        return [decode(v) for v in value]
    if kind == "map":
        return {decode(k): decode(v) for k, v in value}
    if kind == "bytes":
        return base64.b64decode(value)
    if kind == "duration":
        return timedelta(microseconds=int(value) // 1000)
    if kind == "timestamp":
        return _timestamp(value)
    if kind == "type":
        return TypeValue(value)
    if kind == "error":
        return CelError(value)
    if kind == "optional":
        return CelError("cannot convert an optional result (use orValue() or hasValue())")
    return LibraryValue(kind, str(value))  # quantity, url, ip, cidr, semver, format
