"""Programs specialised for given constraints: parameters folded in as constants, variables shared.

A template's validations, compiled once, read the constraint's parameters through `@ck.params()`
(and Gatekeeper's `params`, the constraint object, through `@ck.constraint()`): Python calls whose
results cel-cpp converts again at each evaluation. `specialise(checked, bindings)` turns the bound
tree of such a program - `cel.@block([slot 0, slot 1, ...], body)`, `body` one expression or a
list of them - into one tree for several constraints of that template at once:

    cel.@block([<slots that do not depend on the parameters>,
                <the other slots, for the 1st distinct binding, its parameters as a literal>,
                <the same slots for the 2nd distinct binding>, ...],
               [<body for the 1st distinct binding>..., <body for the 2nd>...])

so that what does not depend on the parameters (the request's containers, ...) is computed once for
all of them, and constraints whose bindings are equal (same parameters, and the same constraint
object when the program reads it) share one result. Values are exactly those of the separate
programs: a slot is evaluated lazily and at most once in either form, and a parameter literal is
the same CEL value cel-expr-python builds from the Python data (anything it would convert
differently - integers beyond int64, tuples, other types - is not folded: `specialise` returns
None and the caller keeps the separate programs).

One thing CEL leaves unspecified can differ: the order in which a map's entries are iterated
(`m.map(k, ...)`, `m.all(k, ...)`). Kubernetes iterates Go maps (a random order, each time); cel-cpp
iterates its hash maps in an order that depends on a per-process hash seed, whether a map came from
Python data or from a literal (`tests/policy/test_prepared.py` checks the values, not that order).
So a validation whose answer depends on that order already differs between Kubernetes API servers,
between webhook workers and between runs; folding the parameters does not make it worse.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from celkeeper.cel import ast
from celkeeper.cel.ast import (
    Call,
    Checked,
    Comprehension,
    Const,
    Entry,
    Expr,
    Ident,
    ListExpr,
    Select,
    StructExpr,
)

PARAMS = "@ck.params"
CONSTRAINT = "@ck.constraint"
BLOCK = "cel.@block"
INDEX = "@index"
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: literal nodes a binding may add (larger parameters keep the call: a literal is rebuilt per evaluation)
MAX_LITERAL_NODES = 20_000


class NotFoldable(ValueError):
    """A value cel-expr-python would not convert as a literal of the same value."""


@dataclass(frozen=True)
class Specialised:
    """The tree of `specialise`: `outputs` values per distinct binding; `layout[i]` is the distinct
    binding of input binding i (its values: `outputs` values from `layout[i] * outputs`)."""

    checked: Checked
    outputs: int
    layout: tuple[int, ...]
    distinct: int


def literal(value: Any, counter: list[int], budget: list[int] | None = None) -> Expr:
    """`value` (JSON-like Python data) as a CEL literal expression with fresh ids from `counter`."""
    if budget is not None:
        budget[0] -= 1
        if budget[0] < 0:
            raise NotFoldable("too large")
    counter[0] += 1
    node_id = counter[0]
    kind = type(value)
    if value is None:
        return Const(node_id, "null", None)
    if kind is bool:
        return Const(node_id, "bool", value)
    if kind is int:
        if not _INT64[0] <= value <= _INT64[1]:
            raise NotFoldable("integer beyond int64")
        return Const(node_id, "int", value)
    if kind is float:
        return Const(node_id, "double", value)
    if kind is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise NotFoldable("not UTF-8") from None
        return Const(node_id, "string", value)
    if kind is list:
        return ListExpr(node_id, [literal(v, counter, budget) for v in value])
    if kind is dict:
        entries = []
        for k, v in value.items():
            key = literal(k, counter, budget)
            if not isinstance(key, Const) or key.kind not in ("string", "int", "bool"):
                raise NotFoldable("map key")
            counter[0] += 1
            entries.append(Entry(counter[0], key, literal(v, counter, budget)))
        return StructExpr(node_id, "", entries)
    raise NotFoldable(kind.__name__)


def _calls(node: Expr, names: tuple[str, ...]) -> bool:
    return any(isinstance(n, Call) and n.function in names for n in ast.walk(node))


def _slot_refs(node: Expr) -> set[int]:
    return {
        int(n.name[len(INDEX) :])
        for n in ast.walk(node)
        if isinstance(n, Ident) and n.name.startswith(INDEX) and n.name[len(INDEX) :].isdigit()
    }


def _split(checked: Checked, outputs: int) -> tuple[list[Expr], list[Expr]] | None:
    """(slot initialisers, output expressions) of a bound tree, or None when it has another shape."""
    root = checked.expr
    if isinstance(root, Call) and root.function == BLOCK and root.target is None:
        if len(root.args) != 2 or not isinstance(root.args[0], ListExpr) or root.args[0].optional_indices:
            return None
        inits, body = list(root.args[0].elements), root.args[1]
    else:
        inits, body = [], root
    if outputs == 1:
        results = [body]
    elif isinstance(body, ListExpr) and not body.optional_indices and len(body.elements) == outputs:
        results = list(body.elements)
    else:
        return None
    if any(_calls(r, (PARAMS, CONSTRAINT, BLOCK)) for r in results):
        return None  # the front end reads the parameters through slots only
    return inits, results


def binding_key(params: Any, constraint: Any, uses_params: bool, uses_constraint: bool) -> str:
    """Equal keys: the program's values are equal for both bindings (it reads only what the key holds)."""
    parts = [params if uses_params else None, constraint if uses_constraint else None]
    try:  # keys in their order: maps that differ only in it are not shared (see the module docstring)
        return json.dumps(parts, allow_nan=True, separators=(",", ":"))
    except (TypeError, ValueError):
        raise NotFoldable("not JSON data") from None


def specialise(
    checked: Checked, outputs: int, bindings: Sequence[tuple[Any, Any]]
) -> Specialised | None:
    """The tree of `checked` (a bound tree with `outputs` results: a list of that many when more than
    one) for every (params, constraint) of `bindings` (see the module docstring); None when it
    cannot be done exactly."""
    split = _split(checked, outputs)
    if split is None or not bindings:
        return None
    inits, results = split
    n = len(inits)
    dependent: set[int] = set()
    kinds: dict[int, str] = {}
    for i, init in enumerate(inits):
        if isinstance(init, Call) and init.function in (PARAMS, CONSTRAINT) and not init.args:
            kinds[i] = init.function
            dependent.add(i)
        elif _calls(init, (PARAMS, CONSTRAINT, BLOCK)):
            return None
        elif any(r >= i for r in _slot_refs(init)):
            return None  # a slot reads only earlier slots
        elif _slot_refs(init) & dependent:
            dependent.add(i)
    uses_params = PARAMS in kinds.values()
    uses_constraint = CONSTRAINT in kinds.values()
    try:
        keys = [binding_key(p, c, uses_params, uses_constraint) for p, c in bindings]
    except NotFoldable:
        return None
    distinct: dict[str, int] = {}
    layout = tuple(distinct.setdefault(k, len(distinct)) for k in keys)
    firsts = [bindings[keys.index(k)] for k in distinct]

    shared = [i for i in range(n) if i not in dependent]
    per = [i for i in range(n) if i in dependent]
    counter = [checked.max_id() + 1]
    types: dict[int, Any] = dict(checked.types)
    raw_types: dict[int, bytes] = dict(checked.raw_types)
    references = dict(checked.references)
    shared_index = {old: new for new, old in enumerate(shared)}

    def clone(node: Expr, index: dict[int, int]) -> Expr:
        """A copy of `node` with fresh ids (types and references follow) and its slots renumbered."""
        counter[0] += 1
        new_id = counter[0]
        old = node.id
        if old in checked.types:
            types[new_id] = checked.types[old]
        if old in checked.raw_types:
            raw_types[new_id] = checked.raw_types[old]
        if old in checked.references:
            references[new_id] = checked.references[old]
        if isinstance(node, Ident):
            name = node.name
            if name.startswith(INDEX) and name[len(INDEX) :].isdigit():
                name = f"{INDEX}{index[int(name[len(INDEX):])]}"
            return Ident(new_id, name)
        if isinstance(node, Const):
            return Const(new_id, node.kind, node.value)
        if isinstance(node, Select):
            return Select(new_id, clone(node.operand, index), node.field, node.test_only)
        if isinstance(node, Call):
            target = clone(node.target, index) if node.target is not None else None
            return Call(new_id, node.function, [clone(a, index) for a in node.args], target)
        if isinstance(node, ListExpr):
            return ListExpr(new_id, [clone(e, index) for e in node.elements], list(node.optional_indices))
        if isinstance(node, StructExpr):
            entries = []
            for entry in node.entries:
                counter[0] += 1
                entry_id = counter[0]
                key = clone(entry.key, index) if isinstance(entry.key, Expr) else entry.key
                entries.append(Entry(entry_id, key, clone(entry.value, index), entry.optional))
            return StructExpr(new_id, node.message_name, entries)
        if isinstance(node, Comprehension):
            return Comprehension(
                new_id,
                node.iter_var,
                clone(node.iter_range, index),
                node.accu_var,
                clone(node.accu_init, index),
                clone(node.loop_condition, index),
                clone(node.loop_step, index),
                clone(node.result, index),
                node.iter_var2,
            )
        raise NotFoldable(f"unknown node {type(node).__name__}")

    new_results: list[Expr] = []
    budget = [MAX_LITERAL_NODES]
    try:
        new_inits = [clone(inits[i], shared_index) for i in shared]
        for params, constraint in firsts:
            index = dict(shared_index)
            for i in per:
                index[i] = len(new_inits) + per.index(i)
            for i in per:
                kind = kinds.get(i)
                if kind == PARAMS:
                    new_inits.append(literal(params, counter, budget))
                elif kind == CONSTRAINT:
                    new_inits.append(literal(constraint, counter, budget))
                else:
                    new_inits.append(clone(inits[i], index))
            new_results.extend(clone(r, index) for r in results)
    except NotFoldable:
        return None
    counter[0] += 1
    body = ListExpr(counter[0], new_results)
    if new_inits:
        counter[0] += 1
        slots = ListExpr(counter[0], new_inits)
        counter[0] += 1
        root: Expr = Call(counter[0], BLOCK, [slots, body])
    else:
        root = body
    tree = Checked(root, types, references, {}, list(checked.line_offsets), raw_types)
    return Specialised(tree, outputs, layout, len(distinct))
