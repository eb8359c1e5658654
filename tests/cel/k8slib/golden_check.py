"""Golden results from real Kubernetes: golden/results.json holds what Gatekeeper v3.23.1's CEL
environment (k8s.io/apiserver v0.36.2, cel-go v0.30.0, built with Go 1.26) answers for each case
expression (cases the port answers otherwise would be listed in unported.py: none today).
golden/regenerate.py rebuilds it from the CASES of the test modules (needs Go and network access to the
Go module proxy); the tests themselves only read the JSON.

A case is (CEL expression, thunk): the thunk computes the same thing with celkeeper.cel.k8slib and
either returns a value or raises LibraryError. Both sides are encoded the same way and compared exactly
(doubles numerically, NaN equal to NaN).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from celkeeper.cel.api import LibraryValue
from celkeeper.cel.celpython.astvalidators import PROGRAM_ERROR
from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib.celvalues import Uint
from celkeeper.cel.k8slib.format import Format
from celkeeper.cel.k8slib.gourl import URL
from celkeeper.cel.k8slib.netip import Addr, Prefix
from celkeeper.cel.k8slib.quantity import Quantity
from celkeeper.cel.k8slib.regex import RegexCompileError
from celkeeper.cel.k8slib.semver import Semver
from celkeeper.cel.k8slib.urls import url_to_string
from tests.cel.k8slib.unported import unported

RESULTS = Path(__file__).parent / "golden" / "results.json"

Case = tuple[str, Callable[[], object]]


@dataclass(frozen=True)
class Opt:
    """An optional value in a thunk's result: Opt(None) is optional.none."""

    value: object


@cache
def results() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RESULTS.read_text())
    return data


def encode(v: object) -> dict[str, Any]:
    """The Python value in the generator's encoding (see tests/cel/gen/main.go)."""
    if isinstance(v, Opt):
        return {"t": "optional", "v": None if v.value is None else encode(v.value)}
    if isinstance(v, bool):
        return {"t": "bool", "v": v}
    if isinstance(v, Uint):
        return {"t": "uint", "v": str(int(v))}
    if isinstance(v, int):
        return {"t": "int", "v": str(v)}
    if isinstance(v, float):
        return {"t": "double", "v": v}
    if isinstance(v, str):
        return {"t": "string", "v": v}
    if isinstance(v, bytes):
        return {"t": "bytes", "v": base64.b64encode(v).decode()}
    if v is None:
        return {"t": "null", "v": None}
    if isinstance(v, timedelta):
        return {"t": "duration", "v": str((v // timedelta(microseconds=1)) * 1000)}
    if isinstance(v, datetime):
        return {"t": "timestamp", "v": v.isoformat().replace("+00:00", "Z")}
    if isinstance(v, list | tuple):
        return {"t": "list", "v": [encode(x) for x in v]}
    if isinstance(v, Mapping):
        entries = [[encode(k), encode(x)] for k, x in v.items()]
        entries.sort(key=lambda e: json.dumps(e[0], separators=(",", ":")))
        return {"t": "map", "v": entries}
    if isinstance(v, Quantity):
        return {"t": "quantity", "v": str(v)}
    if isinstance(v, URL):
        return {"t": "url", "v": url_to_string(v)}
    if isinstance(v, Addr):
        return {"t": "ip", "v": str(v)}
    if isinstance(v, Prefix):
        return {"t": "cidr", "v": str(v)}
    if isinstance(v, Semver):
        return {"t": "semver", "v": str(v)}
    if isinstance(v, Format):
        return {"t": "format", "v": v.name}
    if isinstance(v, LibraryValue):  # the cel-go engine's library values: Kubernetes' own text
        return {"t": v.kind, "v": v.text}
    raise TypeError(f"cannot encode {type(v).__name__}")


def _same(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict) and isinstance(actual, dict):
        if expected.get("t") == "double" and actual.get("t") == "double":
            e, a = float(expected["v"]), float(actual["v"])
            return (math.isnan(e) and math.isnan(a)) or e == a
        return expected.keys() == actual.keys() and all(_same(expected[k], actual[k]) for k in expected)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            _same(e, a) for e, a in zip(expected, actual, strict=True)
        )
    return bool(expected == actual)


def run(thunk: Callable[[], object]) -> dict[str, Any]:
    try:
        return encode(thunk())
    except RegexCompileError as e:  # found when Kubernetes plans the program, and worded so
        return {"t": "program_error", "v": PROGRAM_ERROR + str(e)}
    except LibraryError as e:
        return {"t": "error", "v": str(e)}


def check(key: str, thunk: Callable[[], object]) -> None:
    """Assert celkeeper's answer equals Kubernetes' recorded one for `key` (an expression)."""
    golden = results()
    assert key in golden, f"no golden result for {key!r}: run tests/cel/k8slib/golden/regenerate.py"
    expected = golden[key]
    actual = run(thunk)
    why = unported(key)
    if why is not None:  # a strict expected failure: a case that starts to pass fails the run
        assert not _same(expected, actual), f"{key} now answers as Kubernetes: remove it from unported.py"
        pytest.xfail(why)
    assert _same(expected, actual), f"{key}\n  kubernetes: {expected}\n  celkeeper:  {actual}"


def ids(cases: list[Case]) -> list[str]:
    return [expr for expr, _ in cases]


def lit(s: str) -> str:
    """A CEL double-quoted string literal for s."""
    out = ['"']
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
