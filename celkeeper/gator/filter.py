"""`--run` filters, as `gator verify` reads them (RE2 regular expressions, unanchored).

- ""                : everything.
- "REGEX"           : a case runs when REGEX matches its name or its test's name; a test runs when
                      REGEX matches its name or one of its cases' names.
- "TEST//CASE"      : cases matching CASE inside tests matching TEST (either side may be empty).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import re2

from celkeeper.errors import CelkeeperError


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class Test(Protocol):
    """What a filter reads of a test (gator's tests and the admission policy tests alike)."""

    @property
    def name(self) -> str: ...

    @property
    def cases(self) -> Sequence[_Named]: ...


class FilterError(CelkeeperError):
    """A --run filter that is not a valid regular expression, or has more than one `//`."""


def compile_regex(pattern: str) -> re2._Regexp:
    """Compile an RE2 pattern (Go regexp syntax) quietly; raises re2.error."""
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


def _compile(pattern: str) -> re2._Regexp:
    try:
        return compile_regex(pattern)
    except re2.error as err:
        raise FilterError(f"invalid test filter {pattern!r}: {_re2_message(err)}") from err


def _re2_message(err: Exception) -> str:
    text = err.args[0] if err.args else str(err)
    return text.decode() if isinstance(text, bytes) else str(text)


@dataclass(frozen=True)
class Filter:
    test: re2._Regexp | None = None
    case: re2._Regexp | None = None
    either: bool = False  # one regex: matches the test name or the case name

    @classmethod
    def parse(cls, text: str | None) -> Filter:
        if not text:
            return cls()
        parts = text.split("//")
        if len(parts) > 2:
            raise FilterError(f'invalid test filter {text!r}: a filter may include at most one "//"')
        if len(parts) == 1:
            regex = _compile(parts[0])
            return cls(test=regex, case=regex, either=True)
        return cls(test=_compile(parts[0]), case=_compile(parts[1]))

    def matches_test(self, test: Test) -> bool:
        if self.test is None:
            return True
        if self.either:
            return bool(self.test.search(test.name)) or any(
                self.matches_case(test.name, c.name) for c in test.cases
            )
        return bool(self.test.search(test.name))

    def matches_case(self, test_name: str, case_name: str) -> bool:
        if self.test is None or self.case is None:
            return True
        if self.either:
            return bool(self.case.search(case_name)) or bool(self.test.search(test_name))
        return bool(self.case.search(case_name)) and bool(self.test.search(test_name))
