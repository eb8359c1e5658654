"""Results of running suites, and their `go test`-style rendering (as `gator verify` prints them)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from celkeeper.gator.violation import Violation


@dataclass(frozen=True)
class CaseResult:
    name: str
    error: str | None = None  # why the case failed (None: passed)
    runtime: float = 0.0  # seconds
    skipped: bool = False
    results: tuple[Violation, ...] | None = None  # what the review found (None: nothing was reviewed)

    @property
    def failed(self) -> bool:
        return self.error is not None


@dataclass(frozen=True)
class TestResult:
    __test__ = False  # not a pytest test class
    name: str
    error: str | None = None  # what stopped the test (template, constraint, `invalid` expectation)
    runtime: float = 0.0
    cases: tuple[CaseResult, ...] = ()
    skipped: bool = False
    expected_invalid: bool = False  # an `invalid: true` test (no cases are run)

    @property
    def failed(self) -> bool:
        return self.error is not None or any(c.failed for c in self.cases)


@dataclass(frozen=True)
class SuiteResult:
    path: str  # as the user named it
    error: str | None = None  # what stopped the whole suite (unreadable, malformed)
    runtime: float = 0.0
    tests: tuple[TestResult, ...] = ()
    skipped: bool = False

    @property
    def failed(self) -> bool:
        return self.error is not None or any(t.failed for t in self.tests)


@dataclass(frozen=True)
class Summary:
    """Counted per case; a test that fails before its cases run, or an `invalid` test, counts once."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: tuple[str, ...] = field(default=())  # problems outside any suite (unreadable files)

    @property
    def ok(self) -> bool:
        return self.failed == 0 and not self.errors

    def line(self) -> str:
        text = f"{self.passed} passed, {self.failed} failed"
        text += f", {self.skipped} skipped" if self.skipped else ""
        return text + (f", {len(self.errors)} errors" if self.errors else "")


def summarize(results: Iterable[SuiteResult], errors: Iterable[str] = ()) -> Summary:
    passed = failed = skipped = 0
    for suite in results:
        if suite.error is not None:
            failed += 1
            continue
        if suite.skipped:
            skipped += 1
            continue
        for test in suite.tests:
            if test.skipped:
                skipped += max(len(test.cases), 1)
            elif test.error is not None:
                failed += 1
            elif not test.cases:  # an `invalid` test that passed
                passed += 1
            else:
                for case in test.cases:
                    if case.skipped:
                        skipped += 1
                    elif case.failed:
                        failed += 1
                    else:
                        passed += 1
    return Summary(passed=passed, failed=failed, skipped=skipped, errors=tuple(errors))


def _duration(seconds: float) -> str:
    return f"{seconds:.3f}s"


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def render(
    results: Iterable[SuiteResult], verbose: bool = False, trace: bool = False, failed: bool = False
) -> str:
    """The text gator's PrinterGo writes: per case/test/suite lines, then PASS or FAIL (FAIL also when
    `failed`: something outside the suites failed, e.g. a file that could not be read). With `trace`,
    each reviewed case is followed by `TRACE: <case>` and its results, one JSON object per line
    (`{"msg": ..., "enforcementAction": ..., "scopedEnforcementActions": [...]}`)."""
    out: list[str] = []
    any_failed = failed
    for suite in results:
        for test in suite.tests:
            _render_test(out, test, verbose, trace)
        if suite.failed:
            any_failed = True
            out.append(f"FAIL\t{suite.path}\t{_duration(suite.runtime)}")
            if suite.error is not None:
                out.append(_indent(suite.error, "  "))
        else:
            out.append(f"ok\t{suite.path}\t{_duration(suite.runtime)}")
    out.append("FAIL" if any_failed else "PASS")
    return "\n".join(out) + "\n"


def _render_test(out: list[str], test: TestResult, verbose: bool, trace: bool) -> None:
    if verbose:
        if test.skipped:
            out.append(f"=== SKIP  {test.name}")
            return
        out.append(f"=== RUN   {test.name}")
    elif test.skipped:
        return
    for case in test.cases:
        _render_case(out, case, verbose, trace)
    if test.failed:
        out.append(f"--- FAIL: {test.name}\t({_duration(test.runtime)})")
        if test.error is not None:
            out.append(_indent(test.error, "  "))
    elif verbose:
        out.append(f"--- PASS: {test.name}\t({_duration(test.runtime)})")


def _render_case(out: list[str], case: CaseResult, verbose: bool, trace: bool) -> None:
    if verbose:
        if case.skipped:
            out.append(f"    === SKIP  {case.name}")
            return
        out.append(f"    === RUN   {case.name}")
    if case.error is not None:
        out.append(f"    --- FAIL: {case.name}\t({_duration(case.runtime)})")
        out.append(_indent(case.error, "        "))
    elif verbose:
        out.append(f"    --- PASS: {case.name}\t({_duration(case.runtime)})")
    if trace and case.results is not None:
        prefix = "    --- " if verbose else ""  # gator indents a trace like the case in verbose mode
        count = len(case.results)
        out.append(f"{prefix}TRACE: {case.name}\t{count} result{'s' if count != 1 else ''}")
        out.extend(prefix + json.dumps(v.to_json(), ensure_ascii=False) for v in case.results)
