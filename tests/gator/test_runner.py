"""Assertions (celkeeper.gator.runner.check_assertion): matching messages counted, errors worded like
gator's."""

from __future__ import annotations

import pytest

from celkeeper.gator.runner import CaseFailure, check_assertion
from celkeeper.gator.suite import Assertion


@pytest.mark.parametrize(
    ("violations", "message", "messages", "ok"),
    [
        ("yes", None, ["a"], True),
        ("yes", None, [], False),
        ("no", None, [], True),
        ("no", None, ["a"], False),
        (2, None, ["a", "b"], True),
        (1, None, ["a", "b"], False),
        (0, None, [], True),
        ("yes", "own", ["you need an owner"], True),  # unanchored
        ("yes", "^own", ["you need an owner"], False),
        (1, "b.", ["ab", "bc", "bd"], False),
        (2, "b.", ["ab", "bc", "bd"], True),
        ("no", "zzz", ["a"], True),
    ],
)
def test_assertions_count_matching_messages(
    violations: object, message: str | None, messages: list[str], ok: bool
) -> None:
    assertion = Assertion(violations=violations, message=message)
    if ok:
        check_assertion(assertion, messages)
    else:
        with pytest.raises(CaseFailure, match="unexpected number of violations"):
            check_assertion(assertion, messages)


def test_assertion_errors_read_like_gators() -> None:
    with pytest.raises(CaseFailure) as caught:
        check_assertion(Assertion(violations="yes", message="own"), ["bad image"])
    assert str(caught.value) == (
        'unexpected number of violations: got 0 violations containing "own" but want at least 1: '
        "got messages [bad image]"
    )
    for bad in ("maybe", -1, "1"):
        with pytest.raises(CaseFailure, match='must be a nonnegative integer, "yes", or "no"'):
            check_assertion(Assertion(violations=bad), [])
    with pytest.raises(CaseFailure, match="message contains invalid regular expression"):
        check_assertion(Assertion(message="(unclosed"), ["x"])
