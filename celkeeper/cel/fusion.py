"""Library calls fused with the constructors of their arguments: one Python call instead of several.

`quantity(a).isLessThan(quantity('1Gi'))` is, once bound, three calls into Python
(`@k8s.string_to_quantity` twice, `@k8s.quantity_is_less_than` once), each with its own crossing of
the engine boundary. `fuse(checked)` rewrites it as one call,
`@k8s.quantity_is_less_than<string_to_quantity,string_to_quantity>(a, '1Gi')`, whose implementation
(`fused_functions`) builds the values itself, with the same memoised constructors.

Results and errors stay exactly those of the separate calls. A constructor can fail ("quantities
must match ..."), and CEL reports the first error among a call's arguments; a fused call is only made
once all its (remaining) arguments have evaluated, so an argument after a fused constructor that
fails on its own would win instead. Hence a fallible constructor is fused only when every argument
after it is a literal; a format constant (`format.dns1123Label()`) cannot fail and is always fused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import product
from typing import Any

from celkeeper.cel import ast
from celkeeper.cel.ast import Call, Checked, Const, Expr
from celkeeper.cel.environment import CIDR, FORMAT, FUNCTIONS, IP, OPAQUE_TYPES, QUANTITY, SEMVER, URL
from celkeeper.cel.library import Impl, LibraryRuntime
from celkeeper.cel.rewrite_util import Fresh

#: the constructor of each library type from one string (a format: its key) - its overload id
CONSTRUCTORS = {
    QUANTITY: "string_to_quantity",
    URL: "string_to_url",
    IP: "string_to_ip",
    CIDR: "string_to_cidr",
    SEMVER: "string_to_semver",
    FORMAT: "format",
}
PASS = "_"  # an argument that stays as it is (a library value)


def bases() -> Iterator[tuple[str, tuple[str, ...]]]:
    """(internal function, parameter types) of every call that takes library values."""
    for o in FUNCTIONS.values():
        if any(t in OPAQUE_TYPES for t in o.args):
            yield "@k8s." + o.id, o.args
    for t in OPAQUE_TYPES:
        yield f"@k8s.eq.{t}", (t, t)
        yield f"@k8s.ne.{t}", (t, t)


def fused_name(base: str, sources: tuple[str, ...]) -> str:
    return f"{base}<{','.join(sources)}>"


def variants() -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """(fused name, base, sources) of every fusion `fuse` may produce."""
    for base, params in bases():
        choices = [(PASS, CONSTRUCTORS[t]) if t in OPAQUE_TYPES else (PASS,) for t in params]
        for sources in product(*choices):
            if any(s != PASS for s in sources):
                yield fused_name(base, sources), base, sources


def fused_functions(runtime: LibraryRuntime) -> dict[str, Impl]:
    """fused name -> implementation (the base's, on arguments built by the constructors)."""
    internal = runtime.internal_functions()
    formats = {o.id[len("format.") :]: runtime.implementation(o.id) for o in FUNCTIONS.values()
               if o.id.startswith("format.") and not o.args}  # fmt: skip

    def constructor(source: str) -> Callable[[Any], Any] | None:
        if source == PASS:
            return None
        if source == "format":
            return lambda key: formats[key]()
        return runtime.implementation(source)

    out: dict[str, Impl] = {}
    for name, base, sources in variants():
        out[name] = _apply(internal[base], tuple(constructor(s) for s in sources))
    return out


def _apply(fn: Impl, makers: tuple[Callable[[Any], Any] | None, ...]) -> Impl:
    """`fn` on its arguments, each built by its maker (None: as it is)."""
    if makers == (makers[0],) and makers[0] is not None:
        return _one(fn, makers[0])
    if len(makers) == 2:
        return _two(fn, makers[0], makers[1])
    return lambda *args: fn(*[a if m is None else m(a) for m, a in zip(makers, args, strict=True)])


def _one(fn: Impl, m0: Callable[[Any], Any]) -> Impl:
    return lambda a: fn(m0(a))


def _two(fn: Impl, m0: Callable[[Any], Any] | None, m1: Callable[[Any], Any] | None) -> Impl:
    if m0 is None and m1 is not None:
        return lambda a, b: fn(a, m1(b))
    if m0 is not None and m1 is None:
        return lambda a, b: fn(m0(a), b)
    if m0 is not None and m1 is not None:
        return lambda a, b: fn(m0(a), m1(b))
    return fn


def _source(arg: Expr, param: str, fresh: Callable[[], int]) -> tuple[str, Expr, bool] | None:
    """(constructor, its argument, whether it can fail) when `arg` constructs a `param` value."""
    if not isinstance(arg, Call) or arg.target is not None:
        return None
    ctor = CONSTRUCTORS.get(param)
    if ctor == "format":
        key = arg.function[len("@k8s.format.") :]
        if arg.function.startswith("@k8s.format.") and not arg.args and "format." + key in FUNCTIONS:
            return "format", Const(fresh(), "string", key), False
        return None
    if ctor is not None and arg.function == "@k8s." + ctor and len(arg.args) == 1:
        return ctor, arg.args[0], True
    return None


def fuse(checked: Checked) -> Checked:
    """Fuse constructors into the library calls that take their values (in place; see the module
    docstring for when)."""
    params = dict(bases())
    fresh = Fresh(checked)

    for node in list(ast.walk(checked.expr)):
        if not isinstance(node, Call) or node.function not in params or node.target is not None:
            continue
        types = params[node.function]
        if len(types) != len(node.args):
            continue
        args = list(node.args)
        sources = [PASS] * len(args)
        literal_tail = True  # every argument after the current one is a literal
        for i in range(len(args) - 1, -1, -1):
            found = _source(args[i], types[i], fresh) if types[i] in OPAQUE_TYPES else None
            if found is not None and (literal_tail or not found[2]):
                sources[i], args[i] = found[0], found[1]
            literal_tail = literal_tail and isinstance(args[i], Const)
        if any(s != PASS for s in sources):
            node.function = fused_name(node.function, tuple(sources))
            node.args = args
    return checked
