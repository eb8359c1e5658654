"""Known, documented differences from Kubernetes, per engine.

Tests consult these lists and mark the matching cases as expected failures (strict: a listed case
that starts passing fails the run, so the lists stay true). Each entry says why. Nothing is skipped
silently.

cel-python 0.5's own gaps (no `?.`/`[?`, no dotted function names such as `sets.contains`, no
two-variable comprehensions, `2 * 2u` accepted, `30 == 30.0` an error, `1 < 2.5` an error, Python
`re` instead of RE2) are not in these lists because celkeeper closes them: both engines share
cel-cpp as the front end (parse, type-check, validate), and cel-python runs a lowered form with
celkeeper's comprehension macro and function table (celkeeper.cel.lowering, py_functions).

Known differences no test case pins down (rare in policies; see also the engine docstrings):
- evaluation error messages of the core runtime are each engine's own wording (e.g. cel-cpp's
  `Key not found in map : "x"` for cel-go's `no such key: x`); compile errors keep cel-go's
  line:col, and celkeeper's validators and the Kubernetes libraries use Kubernetes' messages;
- cel-expr-python stops an evaluation after 10,000 comprehension iterations in all (cel-cpp's
  default, not configurable in 0.1.3; Kubernetes bounds cost instead): `Iteration budget exceeded`
  (docs/known-issues.md; tests/cel/test_appends.py pins it);
- cel-expr-python's parser stops at 32 levels of nesting (Kubernetes allows 250): e.g. a chain of
  more than 31 `+` terms does not compile (a CelCompileError naming max_ast_depth);
- Kubernetes values (Quantity, IP, ...) reached through `dyn` are one-entry maps: `type()` says map,
  and `in`/list equality compare them by their token (typed `==`/`!=` use Kubernetes' equality);
- `string(<net.IP>)`/`string(<net.CIDR>)`-style calls on dyn values dispatch at run time;
  `sum()` on a list(dyn) follows the library's own dispatch (the elements' type).
"""

from __future__ import annotations

from tests.cel.k8slib.unported import unported

#: the engines that run celkeeper.cel.k8slib (the Python port of the Kubernetes libraries)
PYTHON_LIBRARY_ENGINES = ("cel-expr-python", "cel-python")

_UINT_IN_DYN = (
    "cel-expr-python hands Python callbacks plain ints for uint values inside a dyn list, so the "
    "Kubernetes min()/max() over a list(dyn) return int where Kubernetes returns the uint element"
)
_DURATION_VIA_DYN = (
    "cel-expr-python 0.1.3 cannot return a duration or timestamp from a Python callback declared "
    "dyn: min()/max()/sum() over a list(dyn) of durations/timestamps is an error (policy data, which "
    "is JSON, never holds durations or timestamps)"
)

#: tests/cel/k8slib golden cases (expression -> reason), per engine
K8S_GOLDEN_GAPS: dict[str, dict[str, str]] = {
    "cel-expr-python": {
        "[dyn(1), dyn(2.5), dyn(3u)].max()": _UINT_IN_DYN,
        "[dyn(2.5), dyn(1), dyn(3u)].max()": _UINT_IN_DYN,
        "[dyn(duration('1s')), dyn(timestamp('2024-01-01T00:00:00Z'))].max()": _DURATION_VIA_DYN,
        "[dyn(duration('1s')), dyn(timestamp('2024-01-01T00:00:00Z'))].min()": _DURATION_VIA_DYN,
        "[dyn(duration('1s')), dyn(timestamp('2024-01-01T00:00:00Z'))].sum()": _DURATION_VIA_DYN,
    },
    "cel-python": {},
}


def k8s_golden_gap(engine: str, expr: str) -> str | None:
    """Why `expr` (a tests/cel/k8slib golden case) differs from Kubernetes on `engine`, or None."""
    if engine in PYTHON_LIBRARY_ENGINES and unported(expr):
        return unported(expr)
    return K8S_GOLDEN_GAPS.get(engine, {}).get(expr)


#: corpus cases ("inputs:expression" -> reason), per engine
_FOLDED = (
    "Kubernetes (cel-go) evaluates `uint(-1)` while planning the program, so the overflow is a compile "
    "error there; celkeeper reports it as an evaluation error (the result is an error either way)"
)
_TYPED_REQUEST = (
    "Kubernetes declares `request` with its fields' types (plugin/cel/compile.go BuildRequestType): "
    "request.dryRun is bool; celkeeper's cel-cpp front end declares every admission variable dyn"
)
CORPUS_GAPS: dict[str, dict[str, str]] = {
    "cel-expr-python": {"none:uint(-1)": _FOLDED, "pod_create:request.dryRun": _TYPED_REQUEST},
    "cel-python": {"none:uint(-1)": _FOLDED, "pod_create:request.dryRun": _TYPED_REQUEST},
}


def corpus_gap(engine: str, inputs: str, expr: str) -> str | None:
    return CORPUS_GAPS.get(engine, {}).get(f"{inputs}:{expr}")
