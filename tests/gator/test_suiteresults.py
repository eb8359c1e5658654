"""Results of running suites and their `go test`-style rendering (celkeeper.gator.suiteresults), as `gator
verify` prints them."""

from __future__ import annotations

from celkeeper.gator import render, summarize
from celkeeper.gator.suiteresults import CaseResult, SuiteResult, TestResult


def _results() -> list[SuiteResult]:
    passing = SuiteResult(
        path="a/suite.yaml",
        runtime=0.0123,
        tests=(
            TestResult(
                name="t1",
                runtime=0.01,
                cases=(CaseResult(name="c1", runtime=0.002), CaseResult(name="c2", skipped=True)),
            ),
            TestResult(name="t2", skipped=True, cases=(CaseResult(name="x", skipped=True),)),
        ),
    )
    failing = SuiteResult(
        path="b/suite.yaml",
        runtime=0.5,
        tests=(
            TestResult(
                name="t3",
                runtime=0.25,
                cases=(CaseResult(name="c3", error="boom\nsecond line", runtime=0.1),),
            ),
            TestResult(name="t4", error="adding template: bad", runtime=0.001),
            TestResult(name="t5", expected_invalid=True, runtime=0.001),
        ),
    )
    broken = SuiteResult(path="c/suite.yaml", error="c/suite.yaml:3:8: document 1: tests: must be a list")
    return [passing, failing, broken]


def test_go_test_output_plain() -> None:
    assert render(_results()) == (
        "ok\ta/suite.yaml\t0.012s\n"
        "    --- FAIL: c3\t(0.100s)\n"
        "        boom\n"
        "        second line\n"
        "--- FAIL: t3\t(0.250s)\n"
        "--- FAIL: t4\t(0.001s)\n"
        "  adding template: bad\n"
        "FAIL\tb/suite.yaml\t0.500s\n"
        "FAIL\tc/suite.yaml\t0.000s\n"
        "  c/suite.yaml:3:8: document 1: tests: must be a list\n"
        "FAIL\n"
    )


def test_go_test_output_verbose() -> None:
    text = render(_results()[:1], verbose=True)
    assert text == (
        "=== RUN   t1\n"
        "    === RUN   c1\n"
        "    --- PASS: c1\t(0.002s)\n"
        "    === SKIP  c2\n"
        "--- PASS: t1\t(0.010s)\n"
        "=== SKIP  t2\n"
        "ok\ta/suite.yaml\t0.012s\n"
        "PASS\n"
    )


def test_summary_counts_cases_tests_and_broken_suites() -> None:
    summary = summarize(_results())
    # passed: c1, t5 (invalid as expected); failed: c3, t4, broken suite; skipped: c2, t2's case
    assert (summary.passed, summary.failed, summary.skipped) == (2, 3, 2)
    assert summary.line() == "2 passed, 3 failed, 2 skipped"
    assert not summary.ok
    clean = summarize(_results()[:1])
    assert clean.ok and clean.line() == "1 passed, 0 failed, 2 skipped"
    assert not summarize([], errors=["x.yaml: cannot read"]).ok


def test_problems_outside_the_suites_are_counted_and_never_a_pass() -> None:
    # a Suite file that could not be read, a template whose CEL does not compile: the run is not clean
    summary = summarize(_results()[:1], errors=["x.yaml:3:1: cannot read: unacceptable character #x0000"])
    assert summary.line() == "1 passed, 0 failed, 2 skipped, 1 errors"
    assert not summary.ok
    assert render([], failed=True) == "FAIL\n"
    assert render([]) == "PASS\n"
    assert render(_results()[:1], failed=True).endswith("ok\ta/suite.yaml\t0.012s\nFAIL\n")
