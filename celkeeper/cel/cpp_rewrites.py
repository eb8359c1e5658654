"""Rewrites of bound trees for the cel-cpp runtime (cel-expr-python), after `binding.bind`.

- `null_safe_has`: cel-go answers `has(e.f)` with false when `e` is null, cel-cpp with an error;
- `literal_matches`: `s.matches('<literal>')` keeps its compiled pattern;
- `dyn_list_index`: `x.indexOf(y)` / `x.lastIndexOf(y)` the checker could not resolve (list or string);
- `dyn_string`: `string(x)` where the checker could not choose between the standard conversions and
  Kubernetes' `ip_to_string` / `cidr_to_string` (x is dyn): library values are string tokens at run
  time (`celkeeper.cel.opaque`), which the standard `string(string)` would return as they are.
"""

from __future__ import annotations

from collections.abc import Callable

from celkeeper.cel import ast, library
from celkeeper.cel.ast import Call, Checked, Comprehension, Const, Expr, Ident, ListExpr, Reference, Select
from celkeeper.cel.environment import FUNCTIONS
from celkeeper.cel.opaque import PREFIX
from celkeeper.cel.rewrite_util import Fresh, Ref, bind_once, bound, clone, plain

#: `string(x)` of a run-time string that may be a library token (LibraryRuntime.string_of_string)
STRING_OF_STRING = "@ck.stringOfString"
_K8S_STRINGS = frozenset({"ip_to_string", "cidr_to_string"})
#: declared results of library functions that can never be (or hold) a token
_PLAIN = frozenset(
    {"bool", "int", "uint", "double", "string", "bytes", "list(string)", "map(string, list(string))"}
)


def _produces_tokens(function: str) -> bool:
    """Whether a call of this internal function may return a library token (or hold one)."""
    if function.startswith(("@k8s.eq.", "@k8s.ne.")):
        return False
    if function.startswith("@k8s.fn."):
        name = function[len("@k8s.fn.") :]
        return any(o.result not in _PLAIN for o in FUNCTIONS.values() if o.function == name)
    if function.startswith("@k8s."):
        o = FUNCTIONS.get(function[len("@k8s.") :])
        return o is None or o.result not in _PLAIN or o.id == "format-named"
    return False


def token_carriers(checked: Checked) -> set[int]:
    """Ids of the nodes whose value may be, or hold, a library token. Tokens only come out of library
    calls (request and policy data cannot forge one: celkeeper.cel.opaque), so a value computed
    without any, directly or through a variable or comprehension bound to one, holds none."""
    names: set[str] = set()  # comprehension variables and block slots that may hold tokens
    bottom_up = list(reversed(list(ast.walk(checked.expr))))  # every node after its descendants
    while True:
        carriers: set[int] = set()
        bound: set[str] = set()
        for node in bottom_up:
            if isinstance(node, Ident):
                carries = node.name in names
            elif isinstance(node, Call) and node.function.startswith("@k8s."):
                carries = _produces_tokens(node.function)
            elif isinstance(node, Comprehension):
                if node.iter_range.id in carriers:
                    bound.update(v for v in (node.iter_var, node.iter_var2) if v)
                if node.accu_init.id in carriers or node.loop_step.id in carriers:
                    bound.add(node.accu_var)
                carries = node.result.id in carriers
            elif isinstance(node, Call) and node.function == "cel.@block" and len(node.args) == 2:
                slots = node.args[0]
                if isinstance(slots, ListExpr):
                    bound.update(f"@index{i}" for i, e in enumerate(slots.elements) if e.id in carriers)
                carries = node.args[1].id in carriers
            else:
                carries = any(c.id in carriers for c in ast.children(node))
            if carries:
                carriers.add(node.id)
        if bound <= names:
            return carriers
        names |= bound


def dyn_string(checked: Checked) -> Checked:
    """`string(x)` (x dyn, Kubernetes overloads possible, x may hold a token) as
    `type(x) == string && x.startsWith(PREFIX) ? @ck.stringOfString(x) : string(x)`: only strings
    that look like tokens reach Python (in place)."""
    fresh = Fresh(checked)
    carriers: set[int] | None = None

    def build_for(call: Call) -> Callable[[Ref], Expr]:
        def build(ref: Ref) -> Expr:
            string_type = Ident(fresh(), "string")
            checked.references[string_type.id] = Reference(name="string")
            is_string = Call(fresh(), "_==_", [Call(fresh(), "type", [ref()]), string_type])
            marked = Call(fresh(), "startsWith", [Const(fresh(), "string", PREFIX)], ref())
            test = Call(fresh(), "_&&_", [is_string, marked])
            token = Call(fresh(), STRING_OF_STRING, [ref()])
            call.args = [ref()]
            return Call(fresh(), "_?_:_", [test, token, call])

        return build

    def fix(node: Expr) -> Expr:
        if not (isinstance(node, Call) and node.function == "string" and node.target is None):
            return node
        nonlocal carriers
        ref = checked.references.get(node.id)
        if ref is None or len(node.args) != 1 or not (_K8S_STRINGS & set(ref.overload_ids)):
            return node
        if carriers is None:
            carriers = token_carriers(checked)
        if node.args[0].id not in carriers:
            return node
        return bound(checked, node.args[0], fresh, build_for(node))

    nodes = list(ast.walk(checked.expr))
    checked.expr = fix(checked.expr)
    for n in nodes:
        ast.replace_children(n, fix)
    return checked


_SHARED_LIST_FUNCTIONS = {
    name: frozenset(o.id for o in FUNCTIONS.values() if o.function == name)
    for name in ("indexOf", "lastIndexOf")
}


def dyn_list_index(checked: Checked) -> Checked:
    """`x.indexOf(y)` / `x.lastIndexOf(y)` that the checker could not resolve between the strings
    extension and Kubernetes' lists library (x and y dyn) as
    `type(x) == list ? @k8s.fn.indexOf(x, y) : x.indexOf(y)`: a list receiver reaches the library
    through a rewritable (bridged) call rather than an overload registered under the shared name."""
    fresh = Fresh(checked)

    def build_for(call: Call) -> Callable[[Ref], Expr]:
        def build(ref: Ref) -> Expr:
            list_type = Ident(fresh(), "list")
            checked.references[list_type.id] = Reference(name="list")
            is_list = Call(fresh(), "_==_", [Call(fresh(), "type", [ref()]), list_type])
            library_call = Call(fresh(), "@k8s.fn." + call.function, [ref(), *call.args])
            call.target = ref()
            return Call(fresh(), "_?_:_", [is_list, library_call, call])

        return build

    def fix(node: Expr) -> Expr:
        if not (
            isinstance(node, Call) and node.function in _SHARED_LIST_FUNCTIONS and node.target is not None
        ):
            return node
        ref = checked.references.get(node.id)
        if ref is None or not (_SHARED_LIST_FUNCTIONS[node.function] & set(ref.overload_ids)):
            return node
        return bound(checked, node.target, fresh, build_for(node))

    nodes = list(ast.walk(checked.expr))
    checked.expr = fix(checked.expr)
    for n in nodes:
        ast.replace_children(n, fix)
    return checked


def null_safe_has(checked: Checked) -> Checked:
    """cel-go answers `has(e.f)` with false when `e` is null; cel-cpp with an error. Rewrite
    `has(e.f)` as `e == null ? false : has(e.f)` (binding `e` once unless it is a plain selection)."""
    fresh = Fresh(checked)

    def guarded(operand: Expr, test: Select) -> Expr:
        is_null = Call(fresh(), "_==_", [operand, Const(fresh(), "null", None)])
        return Call(fresh(), "_?_:_", [is_null, Const(fresh(), "bool", False), test])

    def fix(node: Expr) -> Expr:
        if not (isinstance(node, Select) and node.test_only):
            return node
        if plain(node.operand):
            return guarded(clone(checked, node.operand, fresh), node)
        name = f"@ck.has{fresh()}"
        test = Select(node.id, Ident(fresh(), name), node.field, True)
        return bind_once(fresh, node.operand, name, lambda ident: guarded(ident, test))

    root = fix(checked.expr)
    for n in list(ast.walk(root)):
        ast.replace_children(n, fix)
    checked.expr = root
    return checked


def literal_matches(checked: Checked) -> Checked:
    """`s.matches('<literal>')` as `s.@ck.matches('<literal>')`: cel-cpp compiles the pattern on every
    call (~5-25 us); the runtime's `matches` keeps it compiled (same RE2, same partial match). Literal
    patterns were compiled when the expression was checked (validators), so this call cannot meet an
    invalid one; a receiver that is not a string still finds no overload (cel-cpp dispatches on the
    declared string parameters, and `clean_error` gives the message back its public name)."""
    for node in ast.walk(checked.expr):
        if (
            isinstance(node, Call)
            and node.function == "matches"
            and node.target is not None
            and len(node.args) == 1
            and isinstance(node.args[0], Const)
            and node.args[0].kind == "string"
        ):
            ref = checked.references.get(node.id)
            if ref is not None and ref.overload_ids == ["matches_string"]:
                node.function = library.MATCHES
                checked.references.pop(node.id, None)
    return checked
