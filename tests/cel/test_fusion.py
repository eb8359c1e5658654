"""Constructors fused into the library calls that use them (celkeeper.cel.fusion): the same results
and the same errors as separate calls - cel-python, which does not fuse, is the reference."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.cel import ast, binding, fusion
from celkeeper.cel.api import CelError
from celkeeper.cel.cpp_engine import CelExprPythonEngine
from celkeeper.cel.frontend import Frontend
from tests.cel.conftest import engine_named, evaluate

EXPRESSIONS = [
    "quantity(params.a).isLessThan(quantity(params.b))",
    "quantity(params.a).isLessThan(quantity('1Gi'))",
    "quantity('bad').isLessThan(quantity(params.missing))",
    "quantity(params.a).compareTo(quantity(params.missing))",
    "quantity(params.a) == quantity(params.b)",
    "quantity(params.a) != quantity('1Gi')",
    "quantity(params.a).add(quantity(params.b)).asInteger()",
    "quantity(params.a).asApproximateFloat()",
    "cidr(params.c).containsIP(ip(params.i))",
    "cidr('10.0.0.0/8').containsIP(ip(params.i))",
    "cidr(params.c).containsCIDR(cidr(params.c))",
    "ip(params.i).family()",
    "semver(params.v).isGreaterThan(semver('1.0.0'))",
    "semver(params.v).compareTo(semver(params.w))",
    "url(params.u).getHost()",
    "format.dns1123Label().validate(params.n).hasValue()",
    "format.named('dns1123Label').value().validate(params.n).hasValue()",
]

PARAMS: list[dict[str, Any]] = [
    {"a": "512Mi", "b": "1Gi", "c": "10.0.0.0/8", "i": "10.1.2.3", "v": "1.2.3", "w": "1.2.4",
     "u": "https://example.com/x", "n": "web-1"},
    {"a": "bad", "b": "1Gi", "c": "10.0.0.0/33", "i": "10.1.2", "v": "1.2", "w": "x",
     "u": "::not a url", "n": "Not_A_Label"},
    {"a": "1Gi", "b": "bad", "c": "::1/128", "i": "::1", "v": "2.0.0", "w": "2.0.0-rc.1",
     "u": "http://[::1]:80/", "n": ""},
    {"b": "1", "n": 5},
]  # fmt: skip


@pytest.mark.parametrize("source", EXPRESSIONS)
def test_fused_calls_give_what_separate_calls_give(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = CelExprPythonEngine()
    fused = engine.compile(source)
    with monkeypatch.context() as m:
        m.setattr(fusion, "fuse", lambda checked: checked)
        separate = engine.compile(source)
    assert fused.expression.serialize() != separate.expression.serialize()  # something was fused
    reference = engine_named("cel-python")
    for params in PARAMS:
        act = engine.activation(object=None, old_object=None, request={})
        got = engine.evaluate(fused, act, None, params)
        want = engine.evaluate(separate, act, None, params)
        assert got == want, params  # errors included, word for word
        other = evaluate(reference, source, constraint=params)  # and the other engine agrees on errors
        assert isinstance(got, CelError) == isinstance(other, CelError), (params, got, other)
        if not isinstance(got, CelError):
            assert got == other, params


def _fused_names(source: str) -> list[str]:
    checked = fusion.fuse(binding.bind(Frontend().compile(source).checked))
    return sorted(n.function for n in ast.walk(checked.expr) if isinstance(n, ast.Call) and "<" in n.function)


def test_what_is_fused() -> None:
    # both constructors (the one after the first is a literal)
    assert _fused_names("quantity(params.a).isLessThan(quantity('1Gi'))") == [
        "@k8s.quantity_is_less_than<string_to_quantity,string_to_quantity>"
    ]
    # the last argument always; an earlier fallible constructor only before literals
    assert _fused_names("quantity(params.a).isLessThan(quantity(params.b))") == [
        "@k8s.quantity_is_less_than<_,string_to_quantity>"
    ]
    # a format constant cannot fail: always fused
    assert _fused_names("format.dns1123Label().validate(params.n)") == ["@k8s.format-validate<format,_>"]
    # a value bound to a variable is computed once and not fused
    assert _fused_names("[quantity(params.a)].all(q, q.isLessThan(q))") == []
    # every fused name is registered
    names = {name for name, _, _ in fusion.variants()}
    for source in EXPRESSIONS:
        assert set(_fused_names(source)) <= names
