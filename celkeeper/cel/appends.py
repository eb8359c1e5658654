"""Lists built by comprehensions in linear time on cel-cpp (cel-expr-python).

The `map`, `filter` and `transformList` macros build their result one element at a time,
`@result + [e]`. cel-cpp makes that append in place only with its `enable_comprehension_list_append`
option, which cel-expr-python 0.1.3 leaves off and does not expose: each step then copies the whole
list, so `xs.map(x, f)` costs O(n^2) (bench/engine.py: 1,000 containers 20 ms, 5,000 containers
~460 ms for one `map`; Kubernetes' cel-go appends in place). A request with many containers could so
hold a webhook worker for seconds per expression (cel-cpp stops an evaluation after 10,000
comprehension iterations, which bounds n, not n^2).

`linear_appends(checked)` rewrites such comprehensions, when their range is large, to gather the
elements in chunks of CHUNK (copying a chunk is bounded, the list of chunks grows n / CHUNK times)
and to flatten the chunks at the end:

    size(R) > THRESHOLD && (type(R) == list || type(R) == map)
      ? <the same comprehension with accumulator [chunks, chunk] = [[], []],
         step  size(@result[1]) < CHUNK - 1 ? [@result[0], @result[1] + [e]]
                                            : [@result[0] + [@result[1] + [e]], []],
         result (@result[0] + [@result[1]]).flatten()>
      : <the comprehension as it was>

(`filter` keeps its condition around the step.) The values are the same CEL values, in the same
order, never converted to Python; the same elements are evaluated in the same order, so errors and
cel-cpp's iteration budget are met exactly as before. A range that is not a plain selection is
evaluated once (bound to a variable). Small ranges keep the original comprehension, which is faster
for them.
"""

from __future__ import annotations

from celkeeper.cel import ast
from celkeeper.cel.ast import (
    Call,
    Checked,
    Comprehension,
    Const,
    Expr,
    Ident,
    ListExpr,
    Reference,
)
from celkeeper.cel.rewrite_util import Fresh, Ref, bound, clone

#: elements gathered before a chunk joins the list of chunks (16: fastest of 8-64 at 1,000-5,000)
CHUNK = 16
#: ranges up to this size keep the original comprehension
THRESHOLD = 64


def _appended(step: Expr, accu: str) -> Expr | None:
    """`e` when `step` is `accu + [e]`."""
    if isinstance(step, Call) and step.function == "_+_" and step.target is None and len(step.args) == 2:
        left, right = step.args
        if (
            isinstance(left, Ident)
            and left.name == accu
            and isinstance(right, ListExpr)
            and len(right.elements) == 1
            and not right.optional_indices
        ):
            return right.elements[0]
    return None


def _shape(node: Comprehension) -> tuple[Expr | None, Expr] | None:
    """(condition or None, appended element) of a comprehension that builds a list by appending."""
    accu = node.accu_var
    if not (
        isinstance(node.accu_init, ListExpr)
        and not node.accu_init.elements
        and isinstance(node.result, Ident)
        and node.result.name == accu
        and isinstance(node.loop_condition, Const)
        and node.loop_condition.value is True
    ):
        return None
    step = node.loop_step
    element = _appended(step, accu)
    if element is not None:
        return None, element
    if isinstance(step, Call) and step.function == "_?_:_" and len(step.args) == 3:
        condition, then, otherwise = step.args
        element = _appended(then, accu)
        if element is not None and isinstance(otherwise, Ident) and otherwise.name == accu:
            return condition, element
    return None


class _Builder:
    def __init__(self, checked: Checked) -> None:
        self.checked = checked
        self.fresh = Fresh(checked)

    def field(self, accu: str, name: str) -> Expr:
        """`accu[0]` (the chunks so far, "o") or `accu[1]` (the chunk being filled, "c")."""
        index = Const(self.fresh(), "int", 0 if name == "o" else 1)
        return Call(self.fresh(), "_[_]", [Ident(self.fresh(), accu), index])

    def call(self, function: str, *args: Expr, target: Expr | None = None) -> Call:
        return Call(self.fresh(), function, list(args), target)

    def pair(self, outer: Expr, chunk: Expr) -> ListExpr:
        return ListExpr(self.fresh(), [outer, chunk])

    def is_type(self, value: Expr, name: str) -> Call:
        type_name = Ident(self.fresh(), name)
        self.checked.references[type_name.id] = Reference(name=name)
        return self.call("_==_", self.call("type", value), type_name)

    def one(self, value: Expr) -> ListExpr:
        return ListExpr(self.fresh(), [value])

    def push(self, accu: str, element: Expr) -> Expr:
        """The accumulator with `element` added (see the module docstring)."""
        chunk = self.call("_+_", self.field(accu, "c"), self.one(element))
        spilled = self.call("_+_", self.field(accu, "c"), self.one(clone(self.checked, element, self.fresh)))
        room = self.call(
            "_<_", self.call("size", self.field(accu, "c")), Const(self.fresh(), "int", CHUNK - 1)
        )
        keep = self.pair(self.field(accu, "o"), chunk)
        spill = self.pair(
            self.call("_+_", self.field(accu, "o"), self.one(spilled)), ListExpr(self.fresh(), [])
        )
        return self.call("_?_:_", room, keep, spill)

    def chunked(self, node: Comprehension, condition: Expr | None, element: Expr, rng: Expr) -> Comprehension:
        accu = node.accu_var
        step = self.push(accu, clone(self.checked, element, self.fresh))
        if condition is not None:
            test = clone(self.checked, condition, self.fresh)
            step = self.call("_?_:_", test, step, Ident(self.fresh(), accu))
        chunks = self.call("_+_", self.field(accu, "o"), self.one(self.field(accu, "c")))
        return Comprehension(
            self.fresh(),
            iter_var=node.iter_var,
            iter_range=rng,
            accu_var=accu,
            accu_init=self.pair(ListExpr(self.fresh(), []), ListExpr(self.fresh(), [])),
            loop_condition=Const(self.fresh(), "bool", True),
            loop_step=step,
            result=self.call("flatten", target=chunks),
            iter_var2=node.iter_var2,
        )

    def rewrite(self, node: Comprehension) -> Expr:
        shape = _shape(node)
        if shape is None:
            return node
        condition, element = shape

        def build(ref: Ref) -> Expr:
            big = self.chunked(node, condition, element, ref())
            node.iter_range = ref()
            large = self.call("_>_", self.call("size", ref()), Const(self.fresh(), "int", THRESHOLD))
            # only lists and maps: anything else gets the comprehension's own error, not size()'s
            # (`size(R) > T` first: for a small range the test stops there; for a range size()
            # refuses, CEL's `&&` yields false once the type test is false)
            iterable = self.call("_||_", self.is_type(ref(), "list"), self.is_type(ref(), "map"))
            return self.call("_?_:_", self.call("_&&_", large, iterable), big, node)

        return bound(self.checked, node.iter_range, self.fresh, build)


def linear_appends(checked: Checked) -> Checked:
    """Rewrite list-building comprehensions as in the module docstring (in place, innermost first)."""
    builder = _Builder(checked)

    def visit(node: Expr) -> Expr:
        ast.replace_children(node, visit)
        return builder.rewrite(node) if isinstance(node, Comprehension) else node

    checked.expr = visit(checked.expr)
    return checked
