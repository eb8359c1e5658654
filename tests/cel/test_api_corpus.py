"""The corpus (tests/cel/corpus*.py) on both engines against real Kubernetes 1.34's answers
(tests/cel/golden/results.json): compile errors (and their line:col), checked output types, values
and evaluation errors. Also the differential check: on every policy expression both engines agree.

Evaluation error messages are compared only for the Kubernetes libraries and the validators
celkeeper implements itself; the core runtime's wording is each engine's own (cel-python translates the
common errors into cel-go's words: tests/cel/gaps.py).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from celkeeper.cel import CelCompileError, CelError
from celkeeper.cel.api import Engine
from tests.cel.conftest import engine_named
from tests.cel.corpus import INPUTS
from tests.cel.corpus_cases import ENVIRONMENT, POLICY
from tests.cel.gaps import corpus_gap
from tests.cel.k8slib.golden_check import _same, encode

RESULTS = Path(__file__).parent / "golden" / "results.json"
ENGINE_NAMES = ("cel-go", "cel-python")
_POSITION = re.compile(r"ERROR: <input>:(\d+):(\d+): (.*)")


@cache
def golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RESULTS.read_text())
    return data


def _activation(engine: Engine, inputs: str) -> Any:
    data = INPUTS[inputs]
    return engine.activation(
        object=data.get("object"),
        old_object=data.get("oldObject"),
        request=data.get("request") or {},
        namespace_object=data.get("namespaceObject"),
    )


def _evaluate(engine: Engine, inputs: str, expr: str) -> Any:
    params = INPUTS[inputs].get("params")  # the corpus binds the top-level `params` variable
    return engine.evaluate(
        engine.compile(expr), _activation(engine, inputs), params=params, constraint=params
    )


def _encoded(engine: Engine, inputs: str, expr: str, expected_kind: str) -> dict[str, Any]:
    if expected_kind == "optional":
        present = _evaluate(engine, inputs, f"({expr}).hasValue()")
        if isinstance(present, CelError):
            return {"t": "error", "v": present.message}
        if not present:
            return {"t": "optional", "v": None}
        inner = _evaluate(engine, inputs, f"({expr}).value()")
        return {
            "t": "optional",
            "v": {"t": "error", "v": inner.message} if isinstance(inner, CelError) else encode(inner),
        }
    value = _evaluate(engine, inputs, expr)
    if isinstance(value, CelError):
        return {"t": "error", "v": value.message}
    return encode(value)


def _ours_message(message: str) -> bool:
    """Compile errors whose text celkeeper writes (validators) rather than the front end's checker."""
    return message.startswith(
        (
            "expected type",
            "invalid ",
            "error during formatting",
            "could not parse formatting",
            "too many arguments",
            "index ",
            "unexpected end of string",
            "error parsing regexp",
        )
    )


def _params(cases: list[tuple[str, str]]) -> list[Any]:
    out = []
    for engine_name in ENGINE_NAMES:
        for inputs, expr in cases:
            gap = corpus_gap(engine_name, inputs, expr)
            marks = [pytest.mark.xfail(reason=gap, strict=True)] if gap else []
            out.append(
                pytest.param(engine_name, inputs, expr, marks=marks, id=f"{engine_name}:{inputs}:{expr}")
            )
    return out


def check_case(engine_name: str, inputs: str, expr: str) -> None:
    engine = engine_named(engine_name)
    expected = golden()[f"{inputs}:{expr}"]
    result = expected["result"]
    if result["t"] == "compile_error":
        with pytest.raises(CelCompileError) as info:
            engine.compile(expr)
        m = _POSITION.search(result["v"])
        if m:
            assert (info.value.line, info.value.column) == (int(m.group(1)), int(m.group(2))), str(info.value)
            if _ours_message(m.group(3)):  # cel-go lists every error; celkeeper names the first
                assert info.value.message.split(" (and ")[0] == m.group(3)
        else:  # an error Kubernetes finds when it plans the program: no position
            assert info.value.message == result["v"]
        return
    program = engine.compile(expr)
    assert program.output_type == expected["type"]
    actual = _encoded(engine, inputs, expr, result["t"])
    if result["t"] == "error":
        assert actual["t"] == "error", f"Kubernetes: error {result['v']!r}; celkeeper: {actual}"
        return
    assert _same(result, actual), f"{expr}\n  kubernetes: {result}\n  celkeeper:  {actual}"


@pytest.mark.parametrize(("engine_name", "inputs", "expr"), _params(POLICY))
def test_policy_expression_matches_kubernetes(engine_name: str, inputs: str, expr: str) -> None:
    check_case(engine_name, inputs, expr)


@pytest.mark.parametrize(("engine_name", "inputs", "expr"), _params(ENVIRONMENT))
def test_environment_matches_kubernetes(engine_name: str, inputs: str, expr: str) -> None:
    check_case(engine_name, inputs, expr)


@pytest.mark.parametrize(("inputs", "expr"), POLICY, ids=[f"{i}:{e}" for i, e in POLICY])
def test_engines_agree(inputs: str, expr: str) -> None:
    """The differential test: both engines give the same answer on every policy expression."""
    kind = golden()[f"{inputs}:{expr}"]["result"]["t"]
    answers = []
    for name in ENGINE_NAMES:
        engine = engine_named(name)
        try:
            answers.append(_encoded(engine, inputs, expr, kind))
        except CelCompileError as err:
            answers.append({"t": "compile_error", "v": (err.line, err.column)})
    first = answers[0]
    for other in answers[1:]:
        if first["t"] == "error" or other["t"] == "error":
            assert first["t"] == other["t"], answers
        else:
            assert _same(first, other), answers
