"""The checked CEL syntax tree as plain Python nodes, with checked types and source offsets.

cel-cpp (through cel-expr-python) parses and type-checks; `celkeeper.cel.celpython.astcodec` turns its
`Expression.serialize()` output (a cel.expr.CheckedExpr) into these nodes and writes trees back
for `Env.deserialize()`. The validators, the safety limits, the rewrites and the lowering to
cel-python all work on these nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

# ----------------------------------------------------------------------------------------- types


@dataclass(frozen=True)
class CelType:
    """A checked type, named as cel-go formats it: bool, int, uint, double, string, bytes, null_type,
    dyn, list, map, google.protobuf.Timestamp, google.protobuf.Duration, type, wrapper, error, a type
    parameter, or an opaque/abstract type name (optional_type, kubernetes.Quantity, ...), with
    `params` for the parameterised ones."""

    name: str
    params: tuple[CelType, ...] = ()

    def __str__(self) -> str:
        if self.params:
            return f"{self.name}({', '.join(str(p) for p in self.params)})"
        return self.name


DYN = CelType("dyn")


# ----------------------------------------------------------------------------------------- nodes


@dataclass(eq=False)
class Expr:
    id: int


@dataclass(eq=False)
class Const(Expr):
    kind: str  # null, bool, int, uint, double, string, bytes
    value: object


@dataclass(eq=False)
class Ident(Expr):
    name: str


@dataclass(eq=False)
class Select(Expr):
    operand: Expr
    field: str
    test_only: bool = False


@dataclass(eq=False)
class Call(Expr):
    function: str
    args: list[Expr]
    target: Expr | None = None


@dataclass(eq=False)
class ListExpr(Expr):
    elements: list[Expr]
    optional_indices: list[int] = field(default_factory=list)


@dataclass(eq=False)
class Entry:
    id: int
    key: Expr | str  # a map key expression, or a message field name
    value: Expr
    optional: bool = False


@dataclass(eq=False)
class StructExpr(Expr):
    message_name: str  # "" for a map literal
    entries: list[Entry]


@dataclass(eq=False)
class Comprehension(Expr):
    iter_var: str
    iter_range: Expr
    accu_var: str
    accu_init: Expr
    loop_condition: Expr
    loop_step: Expr
    result: Expr
    iter_var2: str = ""


@dataclass
class Reference:
    name: str = ""
    overload_ids: list[str] = field(default_factory=list)
    value: Const | None = None


@dataclass
class Checked:
    """A decoded CheckedExpr: the tree, the checked type and reference of each node, positions."""

    expr: Expr
    types: dict[int, CelType]
    references: dict[int, Reference]
    positions: dict[int, int]  # node id -> 0-based code-point offset in the source
    line_offsets: list[int]
    raw_types: dict[int, bytes] = field(default_factory=dict)

    def type_of(self, node: Expr) -> CelType:
        return self.types.get(node.id, DYN)

    def max_id(self) -> int:
        return max((n.id for n in walk(self.expr)), default=0)


def children(node: Expr) -> list[Expr]:
    if isinstance(node, Select):
        return [node.operand]
    if isinstance(node, Call):
        return ([node.target] if node.target is not None else []) + list(node.args)
    if isinstance(node, ListExpr):
        return list(node.elements)
    if isinstance(node, StructExpr):
        out: list[Expr] = []
        for e in node.entries:
            if isinstance(e.key, Expr):
                out.append(e.key)
            out.append(e.value)
        return out
    if isinstance(node, Comprehension):
        return [node.iter_range, node.accu_init, node.loop_condition, node.loop_step, node.result]
    return []


def walk(node: Expr) -> Iterator[Expr]:
    """Every node, parents before children (iterative: trees may be deep)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)))


def replace_children(node: Expr, fn: Callable[[Expr], Expr]) -> None:
    """Set each direct child `c` of `node` to `fn(c)` (in place)."""
    if isinstance(node, Select):
        node.operand = fn(node.operand)
    elif isinstance(node, Call):
        if node.target is not None:
            node.target = fn(node.target)
        node.args = [fn(a) for a in node.args]
    elif isinstance(node, ListExpr):
        node.elements = [fn(e) for e in node.elements]
    elif isinstance(node, StructExpr):
        for entry in node.entries:
            if isinstance(entry.key, Expr):
                entry.key = fn(entry.key)
            entry.value = fn(entry.value)
    elif isinstance(node, Comprehension):
        node.iter_range = fn(node.iter_range)
        node.accu_init = fn(node.accu_init)
        node.loop_condition = fn(node.loop_condition)
        node.loop_step = fn(node.loop_step)
        node.result = fn(node.result)
