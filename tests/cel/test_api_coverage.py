"""Every Kubernetes library overload is exercised through both engines by the golden cases
(tests/cel/test_api_k8s_golden.py), and every function that is not in Kubernetes fails to compile."""

from __future__ import annotations

import pytest

from celkeeper.cel import CelCompileError
from celkeeper.cel.api import Engine
from celkeeper.cel.celpython.environment import FUNCTIONS
from celkeeper.cel.celpython.frontend import Frontend
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


_UNWRAP = (
    "cel-go's optional library (version 2, in Kubernetes' environment at compatibility 1.35) has "
    "optional.unwrap / unwrapOpt; cel-python's declared environment (Kubernetes 1.34) does not"
)


@pytest.mark.parametrize(
    ("source", "output_type"),
    [("[optional.of(1)].unwrapOpt()", "list(int)"), ("optional.unwrap([optional.none()])", "list(dyn)")],
)
def test_in_kubernetes_since_1_35(engine: Engine, source: str, output_type: str) -> None:
    if engine.name == "cel-python":
        with pytest.raises(CelCompileError):  # a known gap (strict: it fails when closed)
            engine.compile(source)
        pytest.xfail(_UNWRAP)
    assert engine.compile(source).output_type == output_type
