"""Every Kubernetes library overload is exercised through both engines by the golden cases
(tests/cel/test_k8s_golden.py), and every function that is not in Kubernetes fails to compile."""

from __future__ import annotations

import pytest

from celkeeper.cel import CelCompileError
from celkeeper.cel.api import Engine
from celkeeper.cel.environment import FUNCTIONS
from tests.cel.conftest import engine_named
from tests.cel.test_k8s_golden import CASES


def test_golden_cases_cover_every_kubernetes_overload() -> None:
    engine = engine_named("cel-expr-python")
    seen: set[str] = set()
    for expr in CASES:
        try:
            program = engine.compile(expr)
        except CelCompileError:
            continue
        for ref in program.compiled.checked.references.values():  # type: ignore[attr-defined]
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
        "[optional.of(1)].unwrapOpt()",
        "optional.unwrap([])",
        "jsonpatch.escapeKey('a')",
        "ip('1.2.3.4').isPrivate()",
    ],
)
def test_not_in_kubernetes(engine: Engine, source: str) -> None:
    with pytest.raises(CelCompileError):
        engine.compile(source)
