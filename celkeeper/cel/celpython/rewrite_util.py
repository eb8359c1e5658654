"""Helpers for rewriting checked trees: fresh node ids, clones, binding a value once."""

from __future__ import annotations

import copy
from collections.abc import Callable

from celkeeper.cel.celpython import ast
from celkeeper.cel.celpython.ast import Checked, Comprehension, Const, Expr, Ident, ListExpr, Select

#: yields a fresh reference to a bound value
Ref = Callable[[], Expr]


class Fresh:
    """Node ids not used in `checked` yet."""

    def __init__(self, checked: Checked) -> None:
        self.next = checked.max_id() + 1

    def __call__(self) -> int:
        self.next += 1
        return self.next


def plain(node: Expr) -> bool:
    """A variable or a chain of field selections: cheap to evaluate again, no side effects."""
    while isinstance(node, Select) and not node.test_only:
        node = node.operand
    return isinstance(node, Ident)


def clone(checked: Checked, node: Expr, fresh: Fresh) -> Expr:
    """A copy of `node` with fresh ids (and the references of the originals)."""
    copied = copy.deepcopy(node)
    for n in ast.walk(copied):
        old = n.id
        n.id = fresh()
        if old in checked.references:
            checked.references[n.id] = checked.references[old]
    return copied


def bind_once(fresh: Fresh, operand: Expr, name: str, body: Callable[[Expr], Expr]) -> Comprehension:
    """`body(<ident name>)` with `name` bound to the value of `operand`, evaluated once (a
    comprehension over nothing whose accumulator is `operand`)."""
    return Comprehension(
        fresh(),
        iter_var="@ck.unused",
        iter_range=ListExpr(fresh(), []),
        accu_var=name,
        accu_init=operand,
        loop_condition=Const(fresh(), "bool", False),
        loop_step=Ident(fresh(), name),
        result=body(Ident(fresh(), name)),
    )


def bound(checked: Checked, operand: Expr, fresh: Fresh, build: Callable[[Ref], Expr]) -> Expr:
    """`build(ref)` where `ref()` yields a fresh reference to `operand`'s value: `operand` itself
    (cloned) if it is plain, else a comprehension variable bound to it once."""
    if plain(operand):
        return build(lambda: clone(checked, operand, fresh))
    name = f"@ck.v{fresh()}"
    return bind_once(fresh, operand, name, lambda _ident: build(lambda: Ident(fresh(), name)))
