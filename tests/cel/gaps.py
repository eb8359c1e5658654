"""Known, documented differences from Kubernetes, per engine.

Tests consult these lists and mark the matching cases as expected failures (strict: a listed case
that starts passing fails the run, so the lists stay true). Each entry says why. Nothing is skipped
silently. The cel-go engine is Kubernetes' own CEL: it has no entries.

cel-python 0.5's own gaps (no `?.`/`[?`, no dotted function names such as `sets.contains`, no
two-variable comprehensions, `2 * 2u` accepted, `30 == 30.0` an error, `1 < 2.5` an error, Python
`re` instead of RE2) are not in these lists because celkeeper closes them: the cel-python engine has
a front end of its own (parse, type-check, validate: celkeeper.cel.celpython.frontend), and runs a
lowered form with celkeeper's comprehension macro and function table (celkeeper.cel.celpython.lowering,
functions).

Known differences of cel-python no test case pins down (rare in policies; see also
celkeeper/cel/celpython/validator.py):
- evaluation error messages are translated into cel-go's words for the common errors (no such
  key, division/modulus by zero, no such overload, overflow, conversions); others keep celpy's;
- the front end's parser stops at 32 levels of nesting (Kubernetes allows 250): e.g. a chain of more than
  31 `+` terms does not compile (a CelCompileError naming max_ast_depth);
- `request` and `namespaceObject` are declared dyn (Kubernetes declares their fields' types): an
  unknown field of theirs is the compile error Kubernetes reports (`undefined field 'uid'`), but a
  wrongly typed use of a known field (`request.name + 1`) is an evaluation error, not a compile error;
- the cost budget counts comprehension steps only (see validator.py).
"""

from __future__ import annotations

from tests.cel.k8slib.unported import unported

#: the engines that run celkeeper.cel.k8slib (the Python port of the Kubernetes libraries)
PYTHON_LIBRARY_ENGINES = ("cel-python",)

#: tests/cel/k8slib golden cases (expression -> reason), per engine
K8S_GOLDEN_GAPS: dict[str, dict[str, str]] = {"cel-go": {}, "cel-python": {}}


def k8s_golden_gap(engine: str, expr: str) -> str | None:
    """Why `expr` (a tests/cel/k8slib golden case) differs from Kubernetes on `engine`, or None."""
    if engine in PYTHON_LIBRARY_ENGINES and unported(expr):
        return unported(expr)
    return K8S_GOLDEN_GAPS.get(engine, {}).get(expr)


#: corpus cases ("inputs:expression" -> reason), per engine
_TYPED_REQUEST = (
    "Kubernetes declares `request` with its fields' types (plugin/cel/compile.go BuildRequestType): "
    "request.dryRun is bool; cel-python's front end declares every admission variable dyn "
    "(it checks their field names, not their types)"
)
CORPUS_GAPS: dict[str, dict[str, str]] = {
    "cel-python": {"pod_create:request.dryRun": _TYPED_REQUEST},
}


def corpus_gap(engine: str, inputs: str, expr: str) -> str | None:
    return CORPUS_GAPS.get(engine, {}).get(f"{inputs}:{expr}")
