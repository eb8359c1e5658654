"""Every Kubernetes library case of tests/cel/k8slib (4,700 expressions, with the answers
Gatekeeper v3.23.1's Kubernetes gave, k8s.io/apiserver v0.36.2: tests/cel/k8slib/golden/results.json)
through both engines, end to end: compile in celkeeper's environment, evaluate, compare with
Kubernetes' answer exactly (errors by message). cel-python's known differences are listed in
tests/cel/gaps.py."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.cel import CelCompileError, CelError
from celkeeper.cel.api import Engine
from tests.cel.conftest import engine_named
from tests.cel.gaps import k8s_golden_gap
from tests.cel.k8slib.golden_check import _same, encode, results

CASES = sorted(k for k in results() if not k.startswith("quantity_string:"))


def _run(engine: Engine, expr: str) -> Any:
    act = engine.activation(object=None, old_object=None, request={})
    return engine.evaluate(engine.compile(expr), act)


def celkeeper_result(engine: Engine, expr: str, expected_type: str) -> dict[str, Any]:
    """celkeeper's answer in the golden encoding."""
    try:
        if expected_type == "optional":  # engines do not return optionals: look inside
            present = _run(engine, f"({expr}).hasValue()")
            if isinstance(present, CelError):
                return {"t": "error", "v": present.message}
            if not present:
                return {"t": "optional", "v": None}
            value = _run(engine, f"({expr}).value()")
            inner = {"t": "error", "v": value.message} if isinstance(value, CelError) else encode(value)
            return {"t": "optional", "v": inner}
        value = _run(engine, expr)
    except CelCompileError as err:
        return {"t": "program_error", "v": err.message}
    if isinstance(value, CelError):
        return {"t": "error", "v": value.message}
    return encode(value)


def _params() -> list[object]:
    out = []
    for engine_name in ("cel-go", "cel-python"):
        for expr in CASES:
            gap = k8s_golden_gap(engine_name, expr)
            marks = [pytest.mark.xfail(reason=gap, strict=True)] if gap else []
            out.append(pytest.param(engine_name, expr, marks=marks, id=f"{engine_name}:{expr}"))
    return out


@pytest.mark.parametrize(("engine_name", "expr"), _params())
def test_kubernetes_library_case(engine_name: str, expr: str) -> None:
    expected = results()[expr]
    actual = celkeeper_result(engine_named(engine_name), expr, expected["t"])
    assert _same(expected, actual), f"{expr}\n  kubernetes: {expected}\n  celkeeper:  {actual}"
