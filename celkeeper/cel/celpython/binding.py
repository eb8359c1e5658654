"""Binding the Kubernetes libraries into the cel-python engine: the rewriting of checked trees.

`bind(checked)` rewrites a checked tree so that the interpreter only runs plain calls:

- a call to a Kubernetes overload becomes `@k8s.<overload id>(receiver, args...)` when the checker
  resolved one overload; when several are possible (dyn arguments) it becomes
  `@k8s.fn.<function>(...)`, which picks the overload from the run-time values. `string`,
  `indexOf` and `lastIndexOf` with several candidates keep their name (they share it with the
  standard library and the strings extension): the engine registers the Kubernetes overloads under that
  name for the run-time kinds only Kubernetes uses (a map for opaque values, a list);
- `format.named()` and `<format>.validate()` return optionals: they become
  `optional.ofNonZeroValue(@k8s.<id>(...))` around an internal call returning the value or null;
- `==` / `!=` between Kubernetes values go to the library's equality (Kubernetes' own semantics,
  e.g. quantities compare numerically);
- `cel.@mapInsert` (which cel-cpp's parser, the engine's front end, writes for `transformMap` and
  `transformMapEntry`) becomes `@ck.mapInsert`;
- `<string>.format(<list>)` and `string(<duration>)` become `@ck.format` / `@ck.durationString`
  (`celkeeper.cel.celpython.formatting`: cel-go's output, which cel-cpp's own implementations do not match).

The functions these names stand for are `celkeeper.cel.celpython.library.LibraryRuntime.internal_functions()`.
Library values (Quantity, URL, IP, CIDR, Semver, Format) are the k8slib objects themselves in
celpy (`library.ObjectCodec`).
"""

from __future__ import annotations

from celkeeper.cel.celpython import ast
from celkeeper.cel.celpython.ast import Call, Checked, Expr
from celkeeper.cel.celpython.environment import FUNCTIONS, OPAQUE_TYPES
from celkeeper.cel.celpython.rewrite_util import Fresh

MAP_INSERT = "@ck.mapInsert"
FORMAT = "@ck.format"
DURATION_STRING = "@ck.durationString"
#: internal functions besides the Kubernetes ones: name -> (arity, result type)
INTERNAL_SIGNATURES = {
    FORMAT: (2, "string"),
    DURATION_STRING: (1, "string"),
}
SHARED_NAMES = ("string", "indexOf", "lastIndexOf")
OPTIONAL_RESULTS = ("format-named", "format-validate")
K8S_NAMES = frozenset(o.function for o in FUNCTIONS.values())


def bind(checked: Checked) -> Checked:
    """Rewrite `checked` in place (see the module docstring) and return it."""
    fresh = Fresh(checked)

    def fix(node: Expr) -> Expr:
        if not isinstance(node, Call):
            return node
        if node.function == "cel.@mapInsert":
            node.function = MAP_INSERT
            checked.references.pop(node.id, None)
            return node
        ref = checked.references.get(node.id)
        ids = ref.overload_ids if ref is not None else []
        if node.function == "format" and node.target is not None and ids == ["string_format"]:
            checked.references.pop(node.id, None)
            return Call(node.id, FORMAT, [node.target, *node.args])
        if node.function == "string" and ids == ["duration_to_string"]:
            checked.references.pop(node.id, None)
            return Call(node.id, DURATION_STRING, list(node.args))
        if node.function in ("_==_", "_!=_") and len(node.args) == 2:
            types = {checked.type_of(a).name for a in node.args}
            opaque = types & set(OPAQUE_TYPES)
            if len(opaque) == 1 and len(types) == 1:
                (t,) = opaque
                node.function = f"@k8s.{'eq' if node.function == '_==_' else 'ne'}.{t}"
                checked.references.pop(node.id, None)
            return node
        if node.function not in K8S_NAMES:
            return node
        ids = [i for i in ids if i in FUNCTIONS]
        if not ids or (ref is not None and len(ids) != len(ref.overload_ids)):
            return node  # a standard overload is possible: leave it to the engine
        args = ([node.target] if node.target is not None else []) + list(node.args)
        checked.references.pop(node.id, None)
        if len(ids) == 1:
            call = Call(node.id, "@k8s." + ids[0], args)
            if ids[0] in OPTIONAL_RESULTS:
                call.id = fresh()
                return Call(node.id, "optional.ofNonZeroValue", [call])
            return call
        if node.function in SHARED_NAMES:
            return node
        return Call(node.id, "@k8s.fn." + node.function, args)

    root = fix(checked.expr)
    for n in ast.walk(root):
        ast.replace_children(n, fix)
    checked.expr = root
    return checked
