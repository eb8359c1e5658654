"""The lists library against Kubernetes 1.34 (golden results): homogeneous lists as the checker types
them, and dyn lists (how policy data arrives) where mixed types and the first-overload dispatch show."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib import lists as L
from celkeeper.cel.k8slib import quantity as Q
from celkeeper.cel.k8slib.celvalues import Uint
from tests.cel.k8slib.golden_check import Case, check, ids

T0 = datetime(2024, 1, 1, tzinfo=UTC)
T1 = datetime(2024, 6, 1, tzinfo=UTC)
INF, NAN = float("inf"), float("nan")

# (CEL list literal, Python value, element kind for sum's zero or None when sum does not type-check)
LISTS: list[tuple[str, list[object], str | None]] = [
    ("[]", [], "int"),
    ("[1, 2, 3]", [1, 2, 3], "int"),
    ("[3, 2, 1]", [3, 2, 1], "int"),
    ("[1, 1, 2]", [1, 1, 2], "int"),
    ("[2, 1, 1]", [2, 1, 1], "int"),
    ("[-9223372036854775807, -2]", [-9223372036854775807, -2], "int"),
    ("[9223372036854775807, 1]", [9223372036854775807, 1], "int"),
    ("[1u, 2u, 18446744073709551615u]", [Uint(1), Uint(2), Uint(18446744073709551615)], "uint"),
    ("[18446744073709551615u, 1u]", [Uint(18446744073709551615), Uint(1)], "uint"),
    ("[1.5, 2.5, -0.5]", [1.5, 2.5, -0.5], "double"),
    ("[1.0, double('inf')]", [1.0, INF], "double"),
    ("[1.0, double('nan'), 0.5]", [1.0, NAN, 0.5], "double"),
    ("[double('nan'), 1.0]", [NAN, 1.0], "double"),
    ("['b', 'a', 'c']", ["b", "a", "c"], None),
    ("['a', 'ab', 'b']", ["a", "ab", "b"], None),
    ("['é', 'z', 'Z']", ["é", "z", "Z"], None),
    ("[true, false]", [True, False], None),
    ("[false, true]", [False, True], None),
    ("[b'a', b'b', b'\\x00']", [b"a", b"b", b"\x00"], None),
    (
        "[duration('1s'), duration('2m'), duration('-1h')]",
        [timedelta(seconds=1), timedelta(minutes=2), timedelta(hours=-1)],
        "duration",
    ),
    ("[timestamp('2024-06-01T00:00:00Z'), timestamp('2024-01-01T00:00:00Z')]", [T1, T0], None),
    ("[dyn(1), dyn(2.5), dyn(3u)]", [1, 2.5, Uint(3)], "int"),
    ("[dyn(2.5), dyn(1), dyn(3u)]", [2.5, 1, Uint(3)], "int"),
    ("dyn([1.5, 2.5])", [1.5, 2.5], "int"),
    ("[dyn(1), dyn('a'), dyn(0)]", [1, "a", 0], "int"),
    ("[dyn('a'), dyn(1), dyn('b')]", ["a", 1, "b"], "int"),
    ("[dyn(3), dyn('a'), dyn(1)]", [3, "a", 1], "int"),
    ("[dyn(true), dyn(1)]", [True, 1], "int"),
    ("[dyn(1), dyn(null)]", [1, None], "int"),
    ("dyn([null])", [None], "int"),
    ("dyn([[1], [2]])", [[1], [2]], "int"),
    ("dyn([{'a': 1}])", [{"a": 1}], "int"),
    ("[dyn(1), dyn([2])]", [1, [2]], "int"),
    ("[dyn(1), dyn(1.0), dyn(1u)]", [1, 1.0, Uint(1)], "int"),
    ("[dyn(2), dyn(1.0), dyn(double('nan'))]", [2, 1.0, NAN], "int"),
    ("[dyn(duration('1s')), dyn(timestamp('2024-01-01T00:00:00Z'))]", [timedelta(seconds=1), T0], "int"),
    ("dyn(['a', 'b'])", ["a", "b"], "int"),
]

ITEMS: list[tuple[str, object]] = [
    ("1", 1),
    ("1.0", 1.0),
    ("1u", Uint(1)),
    ("'a'", "a"),
    ("null", None),
    ("2.5", 2.5),
    ("[2]", [2]),
    ("true", True),
    ("{'a': 1}", {"a": 1}),
]


def _list_cases() -> list[Case]:
    out: list[Case] = []
    for lit_l, value, zero in LISTS:
        out += [
            (f"{lit_l}.isSorted()", lambda v=value: L.is_sorted(v)),
            (f"{lit_l}.min()", lambda v=value: L.min_(v)),
            (f"{lit_l}.max()", lambda v=value: L.max_(v)),
        ]
        if zero is not None:
            out.append(
                (f"{lit_l}.sum()", lambda v=value, z=(None if "dyn(" in lit_l else zero): L.sum_(v, z))
            )
        if "dyn(" in lit_l:
            for lit_i, item in ITEMS:
                out += [
                    (f"{lit_l}.indexOf({lit_i})", lambda v=value, i=item: L.index_of(v, i)),
                    (f"{lit_l}.lastIndexOf({lit_i})", lambda v=value, i=item: L.last_index_of(v, i)),
                ]
    return out


# Kubernetes' documented examples (library/lists.go) and typed indexOf cases.
EXAMPLES: list[Case] = [
    ("[1, 2, 3].isSorted()", lambda: L.is_sorted([1, 2, 3])),
    ("['a', 'b', 'b', 'c'].isSorted()", lambda: L.is_sorted(["a", "b", "b", "c"])),
    ("[2.0, 1.0].isSorted()", lambda: L.is_sorted([2.0, 1.0])),
    ("[1, 2, 3].sum()", lambda: L.sum_([1, 2, 3], "int")),
    ("[1.0, 2.0, 3.0].sum()", lambda: L.sum_([1.0, 2.0, 3.0], "double")),
    (
        "[duration('1s'), duration('1m')].sum()",
        lambda: L.sum_([timedelta(seconds=1), timedelta(minutes=1)], "duration"),
    ),
    ("[1, 2, 3].min()", lambda: L.min_([1, 2, 3])),
    ("['d', 'a', 'b', 'c'].min()", lambda: L.min_(["d", "a", "b", "c"])),
    ("[].min()", lambda: L.min_([])),
    ("[].max()", lambda: L.max_([])),
    ("[1, 2, 2, 3].indexOf(2)", lambda: L.index_of([1, 2, 2, 3], 2)),
    ("['a', 'b', 'b', 'c'].indexOf('a')", lambda: L.index_of(["a", "b", "b", "c"], "a")),
    ("[].indexOf(1)", lambda: L.index_of([], 1)),
    ("[1, 2, 2, 3].lastIndexOf(2)", lambda: L.last_index_of([1, 2, 2, 3], 2)),
    ("['a', 'b', 'b', 'c'].lastIndexOf('b')", lambda: L.last_index_of(["a", "b", "b", "c"], "b")),
    ("[[1], [2, 3]].indexOf([2, 3])", lambda: L.index_of([[1], [2, 3]], [2, 3])),
    ("[{'a': dyn(1)}].indexOf({'a': dyn(1.0)})", lambda: L.index_of([{"a": 1}], {"a": 1.0})),
    ("[1.0, 2.0].indexOf(double('nan'))", lambda: L.index_of([1.0, 2.0], NAN)),
    ("[9223372036854775807, 1].sum()", lambda: L.sum_([9223372036854775807, 1], "int")),
    ("[-9223372036854775807, -2].sum()", lambda: L.sum_([-9223372036854775807, -2], "int")),
    (
        "[quantity('1'), quantity('1000m')].indexOf(quantity('1'))",
        lambda: L.index_of([Q.parse_quantity("1"), Q.parse_quantity("1000m")], Q.parse_quantity("1")),
    ),
    (
        "[quantity('1'), quantity('1000m')].lastIndexOf(quantity('1'))",
        lambda: L.last_index_of([Q.parse_quantity("1"), Q.parse_quantity("1000m")], Q.parse_quantity("1")),
    ),
    (
        "[quantity('1')].indexOf(quantity('1').add(0))",
        lambda: L.index_of([Q.parse_quantity("1")], Q.add_int(Q.parse_quantity("1"), 0)),
    ),
    (
        "[quantity('2').sub(1)].indexOf(quantity('1'))",
        lambda: L.index_of([Q.sub_int(Q.parse_quantity("2"), 1)], Q.parse_quantity("1")),
    ),
]

CASES: list[Case] = EXAMPLES + _list_cases()


@pytest.mark.parametrize(("expr", "thunk"), CASES, ids=ids(CASES))
def test_matches_kubernetes(expr: str, thunk: object) -> None:
    check(expr, thunk)  # type: ignore[arg-type]


def test_min_of_empty_list_names_the_function() -> None:
    with pytest.raises(LibraryError, match=r"^min called on empty list$"):
        L.min_([])
