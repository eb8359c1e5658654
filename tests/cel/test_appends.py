"""Lists and maps built by comprehensions on large ranges (celkeeper.cel.appends): the chunked form
gives the values and errors of the comprehension as it was, element for element, around every
boundary."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.cel import appends, ast
from celkeeper.cel.api import CelError, Engine
from celkeeper.cel.ast import Comprehension, ListExpr
from celkeeper.cel.cpp_engine import CelExprPythonEngine, CppProgram

# around the threshold and the chunk size, and a few chunks
SIZES = sorted({0, 1, 2, appends.THRESHOLD - 1, appends.THRESHOLD, appends.THRESHOLD + 1,
                appends.CHUNK * 2 - 1, appends.CHUNK * 2, appends.CHUNK * 2 + 1, 1000})

EXPRESSIONS = [
    "object.items.map(x, x.n)",
    "object.items.map(x, x)",
    "object.items.filter(x, x.n % 3 == 0)",
    "object.items.map(x, x.n % 2 == 0, x.name)",  # map with a filter
    "object.items.map(x, [uint(x.n), 1u])",  # uint survives (values are never converted)
    "object.items.map(x, duration(string(x.n) + 's'))",
    "object.items.transformList(i, x, i * 1000 + x.n)",
    "object.items.map(x, x.tags.map(t, t + '!'))",  # nested: the inner lists are small
    "object.items.filter(x, x.n > 2).map(x, x.name).join(',')",
    "lists.range(size(object.items)).filter(i, i % 7 == 1).map(i, object.items[i].name)",
    "(object.items + object.items).map(x, x.n)",  # a range that is not a plain selection
    "object.items.map(x, x.n == 150 ? x.missing : x.n)",  # an error at element 150
    "object.items.filter(x, x.n == 77 ? 1 / 0 == 1 : true)",  # an error in the condition
    "object.items.map(x, x.n).map(y, y * 2).filter(z, z > 10).size()",
    "object.labels.map(k, k).size()",  # a map range
    "object.items.map(x, x.name).exists(n, n == 'item-999')",
    "object.labels.transformMap(k, v, v + k)",
    "object.labels.transformMap(k, v, k.endsWith('1'), v + '!')",
    "object.labels.transformMapEntry(k, v, {k + '.x': [v]})",
    "object.labels.transformMapEntry(k, v, {'same': v})",  # a duplicate key: the same error
    "object.items.transformMap(i, x, x.name)",  # a list range: keyed by index
    "object.labels.transformMap(k, v, k == 'k70' ? v.missing : v).size()",  # an error at one entry
    "object.count.map(x, x)",  # not iterable: the comprehension's own error
    "object.name.filter(x, true)",
]


def items(n: int) -> dict[str, Any]:
    return {
        "items": [{"n": i, "name": f"item-{i}", "tags": [f"t{i}", "x"]} for i in range(n)],
        "labels": {f"k{i}": "v" for i in range(n)},
        "count": n,
        "name": "x" * n,
    }


@pytest.fixture(scope="module")
def chunked() -> CelExprPythonEngine:
    return CelExprPythonEngine()


def compile_unchanged(engine: CelExprPythonEngine, source: str) -> CppProgram:
    """The program with cel-cpp's own comprehensions (the rewrite switched off while compiling)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(appends, "linear_appends", lambda checked: checked)
        return engine.compile(source)


def _value(engine: Engine, program: Any, n: int) -> Any:
    result = engine.evaluate(program, engine.activation(object=items(n), old_object=None, request={}))
    return ("error", result.message) if isinstance(result, CelError) else ("value", result)


def _chunked_nodes(program: CppProgram) -> int:
    assert program.bound is not None
    return sum(
        1
        for n in ast.walk(program.bound.expr)
        if isinstance(n, Comprehension)
        and isinstance(n.accu_init, ListExpr)
        and len(n.accu_init.elements) == 2
        and all(isinstance(e, ListExpr) and not e.elements for e in n.accu_init.elements)
    )


@pytest.mark.parametrize("source", EXPRESSIONS)
def test_chunked_comprehensions_equal_cel_cpps_own(chunked: CelExprPythonEngine, source: str) -> None:
    fast, reference = chunked.compile(source), compile_unchanged(chunked, source)
    assert _chunked_nodes(fast) >= 1  # the rewrite applies to this shape
    assert _chunked_nodes(reference) == 0
    for n in SIZES:
        assert _value(chunked, fast, n) == _value(chunked, reference, n), (source, n)


def test_errors_and_values_are_those_of_the_element_that_fails(chunked: CelExprPythonEngine) -> None:
    program = chunked.compile("object.items.map(x, x.n == 150 ? x.missing : x.n)")
    kind, message = _value(chunked, program, 1000)
    assert kind == "error" and "missing" in message
    assert _value(chunked, program, 150) == ("value", list(range(150)))


def test_the_iteration_budget_is_spent_as_before(chunked: CelExprPythonEngine) -> None:
    # cel-cpp stops an evaluation after 10,000 comprehension iterations in all; the chunked form
    # iterates exactly as often (the flatten at the end is not a comprehension)
    source = "lists.range(size(object.items)).filter(i, i < 0) + object.items.filter(x, x.n < 0)"
    for n in (4999, 5000, 5001):
        reference = compile_unchanged(chunked, source)
        assert _value(chunked, chunked.compile(source), n) == _value(chunked, reference, n)
    assert _value(chunked, chunked.compile(source), 5001) == ("error", "Iteration budget exceeded")


def test_other_comprehensions_are_left_alone(chunked: CelExprPythonEngine) -> None:
    for source in ("object.items.all(x, x.n >= 0)", "object.items.exists_one(x, x.n == 3)",
                   "object.labels.all(k, v, k != v)"):
        assert _chunked_nodes(chunked.compile(source)) == 0, source
