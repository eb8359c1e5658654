"""Offline tools on policy files: Suites run with `gator verify`'s semantics, and `gator test`-like reviews.

suite = parse_suite(document, display)        # celkeeper.gator.suite (is_suite tells Suite documents)
runner = Runner(read, PolicyBackend(engine))   # read: path -> celkeeper.documents.ParsedText
result = runner.run(suite, Filter.parse("test//case"))
print(render([result], verbose), summarize([result]).line())

The names below are imported from their modules when first used (PEP 562): `test` uses gator.backend and
gator.reviews without paying for the Suite runner's modules (re2 among them).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from celkeeper.gator.filter import Filter, FilterError
    from celkeeper.gator.runner import Runner
    from celkeeper.gator.suite import Suite, SuiteError, is_suite, parse_suite
    from celkeeper.gator.suiteresults import CaseResult, SuiteResult, Summary, TestResult, render, summarize

_MODULES = {
    "Filter": "filter",
    "FilterError": "filter",
    "CaseResult": "suiteresults",
    "SuiteResult": "suiteresults",
    "Summary": "suiteresults",
    "TestResult": "suiteresults",
    "render": "suiteresults",
    "summarize": "suiteresults",
    "Runner": "runner",
    "Suite": "suite",
    "SuiteError": "suite",
    "is_suite": "suite",
    "parse_suite": "suite",
}

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


def __getattr__(name: str) -> object:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
