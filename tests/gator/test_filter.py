"""`--run` filters (celkeeper.gator.filter) as `gator verify` reads them."""

from __future__ import annotations

import pytest

from celkeeper.gator import Filter, FilterError
from celkeeper.gator.suite import Case, Test


def _test(name: str, *cases: str) -> Test:
    return Test(name=name, template="t", constraint="c", cases=tuple(Case(name=c, object="o") for c in cases))


def test_filter_semantics_follow_gator() -> None:
    labels = _test("require-foo-label", "missing-label", "with-label")
    other = _test("forbid-foo", "empty-object")
    everything = Filter.parse("")
    assert everything.matches_test(labels) and everything.matches_case("a", "b")
    either = Filter.parse("missing")
    assert either.matches_test(labels)  # through its case
    assert not either.matches_test(other)
    assert either.matches_case("require-foo-label", "missing-label")
    assert not either.matches_case("require-foo-label", "with-label")
    assert either.matches_case("missing-things", "anything")  # through the test name
    both = Filter.parse("^require//label$")
    assert both.matches_test(labels) and not both.matches_test(other)
    assert both.matches_case("require-foo-label", "with-label")
    assert not both.matches_case("require-foo-label", "missing-label-x")
    cases_only = Filter.parse("//empty")
    assert cases_only.matches_test(other) and cases_only.matches_case("forbid-foo", "empty-object")
    assert not cases_only.matches_case("forbid-foo", "full")


@pytest.mark.parametrize("bad", ["a//b//c", "(", "x//[z"])
def test_bad_filters_are_errors(bad: str) -> None:
    with pytest.raises(FilterError):
        Filter.parse(bad)
