"""Kubernetes' CEL lists library (k8s.io/apiserver/pkg/cel/library/lists.go, 1.34).

The quirks are Kubernetes' own: isSorted, min and max only look for the "preferred" comparison result,
so a comparison that errors (mixed types such as `[1, 'a']` reached through dyn, or a NaN) is silently
skipped rather than reported; an element that is not comparable at all (null, a list, a map, a
Quantity...) is a "no such overload" error. On a list(dyn) (all policy data) cel-go picks the overload by the
type of the first element: `[dyn(1), dyn(2.5)].sum()` adds 2.5 to an int and fails with "no such overload",
while a list starting with null, a list or a map fails with "no such overload: sum(list)".
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib.celvalues import COMPARABLE, NO_SUCH_OVERLOAD, Uint, add, compare, equal, kind

SUM_KINDS = ("int", "uint", "double", "duration")
_ADDERS = frozenset({"int", "uint", "double", "string", "bytes", "list", "duration", "timestamp"})


def _comparer(v: object) -> object:
    if kind(v) not in COMPARABLE:
        raise LibraryError(NO_SUCH_OVERLOAD)
    return v


def _compare_or_none(a: object, b: object) -> int | None:
    try:
        return compare(a, b)
    except LibraryError:
        return None


def _dispatch(name: str, values: Sequence[object], kinds: frozenset[str] | tuple[str, ...]) -> str | None:
    """cel-go's runtime dispatch over the per-type overloads: the first overload whose list element type
    matches the list's first element (the first overload for an empty list), else an error."""
    if not values:
        return None
    k = kind(values[0])
    if k not in kinds:
        raise LibraryError(f"no such overload: {name}(list)")
    return k


def is_sorted(values: Sequence[object]) -> bool:
    """<list>.isSorted()."""
    _dispatch("isSorted", values, COMPARABLE)
    prev: object = None
    first = True
    for v in values:
        _comparer(v)
        if not first and _compare_or_none(prev, v) == 1:
            return False
        prev, first = v, False
    return True


def _extreme(values: Sequence[object], name: str, prefer: int) -> object:
    _dispatch(name, values, COMPARABLE)
    result: object = None
    first = True
    for v in values:
        _comparer(v)
        if first:
            result, first = v, False
        elif _compare_or_none(result, v) == prefer:
            result = v
    if first:
        raise LibraryError(f"{name} called on empty list")
    return result


def min_(values: Sequence[object]) -> object:
    """<list>.min(); 'min called on empty list' for []."""
    return _extreme(values, "min", 1)


def max_(values: Sequence[object]) -> object:
    """<list>.max(); 'max called on empty list' for []."""
    return _extreme(values, "max", -1)


_ZEROS: dict[str, object] = {"int": 0, "uint": Uint(0), "double": 0.0, "duration": timedelta(0)}


def sum_(values: Sequence[object], static_kind: str | None = None) -> object:
    """<list>.sum(). `static_kind` is the element type the checker resolved (int, uint, double, duration)
    when it resolved one; for a list(dyn) (None) cel-go dispatches on the first element's type, and an
    empty list takes the first overload (int)."""
    zero_kind = static_kind or _dispatch("sum", values, SUM_KINDS) or "int"
    acc = _ZEROS[zero_kind]
    for v in values:
        if kind(v) not in _ADDERS:
            raise LibraryError(NO_SUCH_OVERLOAD)
        acc = add(acc, v)
    return acc


def index_of(values: Sequence[object], item: object) -> int:
    """<list>.indexOf(item): the first index whose element equals item, or -1."""
    for i, v in enumerate(values):
        if _equal_true(v, item):
            return i
    return -1


def last_index_of(values: Sequence[object], item: object) -> int:
    """<list>.lastIndexOf(item)."""
    for i in range(len(values) - 1, -1, -1):
        if _equal_true(values[i], item):
            return i
    return -1


def _equal_true(a: object, b: object) -> bool:
    # indexOf calls element.Equal(item) (not types.Equal), and counts only a true result.
    if a is None:
        return b is None
    try:
        return equal(a, b)
    except LibraryError:
        return False
