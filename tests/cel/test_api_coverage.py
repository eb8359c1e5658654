"""Every Kubernetes library overload is exercised through both engines by the golden cases
(tests/cel/test_api_k8s_golden.py), and every function that is not in Kubernetes fails to compile."""

from __future__ import annotations

import pytest

from celkeeper.cel import CelCompileError, CelError
from celkeeper.cel.api import Engine
from celkeeper.cel.celpython.environment import FUNCTIONS
from celkeeper.cel.celpython.frontend import Frontend
from tests.cel.conftest import evaluate
from tests.cel.test_api_k8s_golden import CASES


def test_golden_cases_cover_every_kubernetes_overload() -> None:
    frontend = Frontend()  # cel-python's checker: it resolves each call to its overloads
    seen: set[str] = set()
    for expr in CASES:
        try:
            compiled = frontend.compile(expr)
        except CelCompileError:
            continue
        for ref in compiled.checked.references.values():
            seen.update(ref.overload_ids)
    assert sorted(set(FUNCTIONS) - seen) == []


@pytest.mark.parametrize(
    "source",
    [
        "cel.bind(x, 1, x)",
        "math.least(1, 2)",
        "math.ceil(1.5)",
        "math.bitAnd(1, 2)",
        "base64.decode('aGk=')",
        "base64.encode(b'hi')",
        "'abc'.reverse()",
        "strings.quote",
        "[1].includes(1)",
        "quantity('1').sign()",
        "quantity('1').mul(2)",
        "quantity('1').div(2)",
        "authorizer.group('apps')",
        "image('nginx')",
        "regex.extract('a', 'a')",
        "jsonpatch.escapeKey('a')",
        "ip('1.2.3.4').isPrivate()",
    ],
)
def test_not_in_kubernetes(engine: Engine, source: str) -> None:
    with pytest.raises(CelCompileError):
        engine.compile(source)


@pytest.mark.parametrize(
    ("source", "output_type"),
    [("[optional.of(1)].unwrapOpt()", "list(int)"), ("optional.unwrap([optional.none()])", "list(dyn)")],
)
def test_in_kubernetes_since_1_35(engine: Engine, source: str, output_type: str) -> None:
    # cel-go's optional library version 2 (cel/library.go); cel-python declares them itself
    assert engine.compile(source).output_type == output_type


_POD = {
    "spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b"}, {"name": "c", "image": "redis"}]}
}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("[optional.of(1), optional.none(), optional.of(3)].unwrapOpt() == [1, 3]", True),
        ("[optional.of(1), optional.none(), optional.of(3)].unwrapOpt()", [1, 3]),
        ("optional.unwrap([optional.of(1), optional.none(), optional.of(3)])", [1, 3]),
        ("optional.unwrap([]) == []", True),
        ("optional.unwrap([])", []),
        ("[].unwrapOpt()", []),
        ("optional.unwrap([optional.none(), optional.none()])", []),
        ("[optional.of([1]), optional.of([2])].unwrapOpt().size()", 2),
        ("object.spec.containers.map(c, c.?image).unwrapOpt()", ["nginx", "redis"]),
        ("optional.unwrap(object.spec.containers.map(c, c.?image)) == ['nginx', 'redis']", True),
        ("optional.unwrap([object.?spec.?nope, object.?spec.?containers[0].?name])", ["a"]),
    ],
)
def test_unwrap_optionals(engine: Engine, source: str, expected: object) -> None:
    assert evaluate(engine, source, object=_POD) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("[dyn(optional.of(1)), dyn(2)].unwrapOpt()", "value 2 is not optional"),
        ("optional.unwrap([dyn(optional.none()), dyn('x')])", "value x is not optional"),
        ("optional.unwrap([dyn(optional.none()), dyn(null)])", "value 0 is not optional"),
        (
            "optional.unwrap(object.spec.containers"
            ".map(c, has(c.image) ? dyn(optional.of(c.image)) : dyn(c.name)))",
            "value b is not optional",
        ),
        ("optional.unwrap([dyn(optional.none()), dyn(1 / 0)])", "division by zero"),
        ("optional.unwrap(dyn([1]))", "no such overload: optional.unwrap(list)"),
        ("optional.unwrap(dyn(1))", "no such overload: optional.unwrap(int)"),
        ("dyn(1).unwrapOpt()", "no such overload: unwrapOpt(int)"),
    ],
)
def test_unwrap_errors(engine: Engine, source: str, message: str) -> None:
    result = evaluate(engine, source, object=_POD)
    assert isinstance(result, CelError) and result.message == message


@pytest.mark.parametrize(
    "source",
    [
        "[1].unwrapOpt()",
        "optional.unwrap(1)",
        "optional.unwrap([optional.of(1)], 1)",
        "[optional.of(1)].unwrap()",
    ],
)
def test_unwrap_compile_errors(engine: Engine, source: str) -> None:
    with pytest.raises(CelCompileError):
        engine.compile(source)
