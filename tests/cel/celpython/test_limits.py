"""Safety limits of the cel-python engine's front end: hostile sources fail to compile with an error
that names the limit (the cel-go engine has Kubernetes' own parser limits and runtime cost budget)."""

from __future__ import annotations

import pytest

from celkeeper.cel import CelCompileError, get_engine
from celkeeper.cel.api import Engine
from celkeeper.settings import CelLimits
from tests.cel.conftest import evaluate

SMALL = CelLimits(
    max_expression_length=200,
    max_ast_depth=12,
    max_comprehension_depth=2,
    max_literal_length=16,
    max_aggregate_literal_size=4,
    max_regex_length=8,
)


@pytest.fixture(scope="module", params=["cel-python"])
def small(request: pytest.FixtureRequest) -> Engine:
    return get_engine(request.param, SMALL)


def limit_of(engine: Engine, source: str) -> str | None:
    with pytest.raises(CelCompileError) as info:
        engine.compile(source)
    assert info.value.limit is None or info.value.limit in str(info.value)
    return info.value.limit


def test_expression_length(small: Engine) -> None:
    assert limit_of(small, "1 + " * 60 + "1") == "max_expression_length"


def test_ast_depth(small: Engine) -> None:
    assert limit_of(small, "[[[[[[[[[[[[[1]]]]]]]]]]]]]") == "max_ast_depth"
    small.compile("[[[1]]]")


def test_parser_nesting_limit_is_reported_as_depth(engine: Engine) -> None:
    deep = ["(" * 40 + "1" + ")" * 40, "1" + " + 1" * 40]
    if engine.name == "cel-go":  # Kubernetes' parser allows 250 levels
        assert [engine.compile(s).output_type for s in deep] == ["int", "int"]
        return
    # cel-cpp's parser (cel-python's front end) stops at 32 levels whatever the configured limit
    assert [limit_of(engine, s) for s in deep] == ["max_ast_depth", "max_ast_depth"]


def test_deep_unary_chains_do_not_crash(engine: Engine) -> None:
    # the parser folds repeated unary operators (as cel-go's does)
    assert evaluate(engine, "!" * 3000 + "true") is True
    assert evaluate(engine, "-" * 3001 + "1") == -1


def test_nested_comprehensions(small: Engine) -> None:
    two = "[[1]].all(x, x.all(y, y > 0))"
    assert small.compile(two).output_type == "bool"
    three = "[[[1]]].all(x, x.all(y, y.all(z, z > 0)))"
    assert limit_of(small, three) == "max_comprehension_depth"
    # a comprehension over the result of another is not nested work
    assert small.compile("[1].map(x, x).map(y, y).all(z, z > 0)").output_type == "bool"


def test_literal_sizes(small: Engine) -> None:
    assert limit_of(small, "'" + "a" * 17 + "'") == "max_literal_length"
    assert limit_of(small, "b'" + "a" * 17 + "'") == "max_literal_length"
    assert limit_of(small, "[1, 2, 3, 4, 5]") == "max_aggregate_literal_size"
    assert limit_of(small, "{'a': 1, 'b': 2, 'c': 3, 'd': 4, 'e': 5}") == "max_aggregate_literal_size"
    small.compile("[1, 2, 3, 4]")


def test_regex_length(small: Engine) -> None:
    assert limit_of(small, "'x'.matches('a{1,1000}b')") == "max_regex_length"
    assert limit_of(small, "'x'.find('a{1,1000}b')") == "max_regex_length"
    small.compile("'x'.matches('a+b')")


def test_default_limits_accept_real_templates(engine: Engine) -> None:
    src = (
        "object.spec.containers.all(c, c.ports.all(p, p.containerPort > 1024 && c.env.all(e, e.name != '')))"
    )
    assert engine.compile(src).output_type == "bool"


def test_regular_expressions_are_linear_time(engine: Engine) -> None:
    # catastrophic backtracking for a backtracking engine; RE2 answers at once
    text = "a" * 5000 + "!"
    assert evaluate(engine, "object.s.matches('^(a+)+$')", object={"s": text}) is False
    assert evaluate(engine, "object.s.find('(a|aa)+!')", object={"s": text}) == text
