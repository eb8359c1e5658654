"""Offline tools on policy files: Suites run with `gator verify`'s semantics, and `gator test`-like reviews.

suite = parse_suite(document, display)        # celkeeper.gator.suite (is_suite tells Suite documents)
runner = Runner(read, PolicyBackend(engine))   # read: path -> celkeeper.documents.ParsedText
result = runner.run(suite, Filter.parse("test//case"))
print(render([result], verbose), summarize([result]).line())
"""

from celkeeper.gator.filter import Filter, FilterError
from celkeeper.gator.runner import Runner
from celkeeper.gator.suite import Suite, SuiteError, is_suite, parse_suite
from celkeeper.gator.suiteresults import CaseResult, SuiteResult, Summary, TestResult, render, summarize

__all__ = [
    "CaseResult",
    "Filter",
    "FilterError",
    "Runner",
    "Suite",
    "SuiteError",
    "SuiteResult",
    "Summary",
    "TestResult",
    "is_suite",
    "parse_suite",
    "render",
    "summarize",
]
