"""Reading `gator verify -v --trace` and `celkeeper verify -v --trace` output into comparable results.

Both print go-test style lines (`=== RUN`, `--- PASS:`, `--- FAIL:` for tests and, indented, their
cases; `ok|FAIL <suite> <time>` after each suite's tests). With --trace each reviewed case is
followed by `--- TRACE: <case>` and the results of the review: gator dumps each result with spew
(`Msg: (string) (len=N) "<Go-quoted>"`, `EnforcementAction: ...`, `ScopedEnforcementActions: ...`),
celkeeper prints one JSON object per result. `parse` returns, per suite, the tests in order with their
cases, each with its status, error text and results (sorted, so order does not matter).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

Row = tuple[str, str, tuple[str, ...]]  # (message, enforcement action, scoped enforcement actions)

_TEST_RUN = re.compile(r"^=== (RUN|SKIP)\s+(.*)$")
_CASE_RUN = re.compile(r"^    === (RUN|SKIP)\s+(.*)$")
_CASE_END = re.compile(r"^    --- (PASS|FAIL): (.*)\t\(.*\)$")
_TRACE = re.compile(r"^(?:    --- )?TRACE: (.*?)\t(.*)$")
_TEST_END = re.compile(r"^--- (PASS|FAIL): (.*)\t\(.*\)$")
_SUITE_END = re.compile(r"^(ok|FAIL)\t(.*)\t\S+$")


@dataclass
class CaseOutcome:
    name: str
    status: str = "RUN"  # PASS, FAIL, SKIP
    error: str = ""
    trace: list[str] = field(default_factory=list)

    @property
    def results(self) -> tuple[Row, ...] | None:
        """The review's results (sorted), or None when there was no trace (the case did not review)."""
        if not self.trace:
            return None
        return tuple(sorted(_rows(self.trace)))


@dataclass
class TestOutcome:
    __test__ = False
    name: str
    status: str = "RUN"
    error: str = ""
    cases: list[CaseOutcome] = field(default_factory=list)


@dataclass
class SuiteOutcome:
    path: str
    status: str
    error: str = ""
    tests: list[TestOutcome] = field(default_factory=list)


def parse(text: str) -> list[SuiteOutcome]:
    suites: list[SuiteOutcome] = []
    pending: list[TestOutcome] = []
    test: TestOutcome | None = None
    case: CaseOutcome | None = None
    sink: list[str] | None = None  # where indented continuation lines go
    for line in text.splitlines():
        if m := _SUITE_END.match(line):
            suites.append(SuiteOutcome(m.group(2), "PASS" if m.group(1) == "ok" else "FAIL", tests=pending))
            pending, test, case = [], None, None
            sink = _ErrorSink(suites[-1])
            continue
        if m := _TEST_RUN.match(line):
            test = TestOutcome(m.group(2).rstrip(), status="SKIP" if m.group(1) == "SKIP" else "RUN")
            pending.append(test)
            case, sink = None, None
            continue
        if m := _CASE_RUN.match(line):
            assert test is not None, line
            case = CaseOutcome(m.group(2).rstrip(), status="SKIP" if m.group(1) == "SKIP" else "RUN")
            test.cases.append(case)
            sink = None
            continue
        if m := _CASE_END.match(line):
            assert case is not None and case.name == m.group(2), (line, case)
            case.status = m.group(1)
            sink = _ErrorSink(case)
            continue
        if (m := _TRACE.match(line)) and case is not None and case.name == m.group(1):
            case.trace.append(m.group(2))
            sink = case.trace
            continue
        if m := _TEST_END.match(line):
            assert test is not None and test.name == m.group(2), (line, test)
            test.status = m.group(1)
            sink = _ErrorSink(test)
            case = None
            continue
        if line in ("PASS", "FAIL"):
            sink = None
            continue
        if sink is None:
            continue
        if isinstance(sink, _ErrorSink):
            sink.add(line)
        else:
            sink.append(line[len("    --- ") :] if line.startswith("    --- ") else line)
    return suites


class _ErrorSink(list):  # type: ignore[type-arg]
    """Collects the indented error lines printed after a FAIL line into the owner's `error`."""

    def __init__(self, owner: CaseOutcome | TestOutcome | SuiteOutcome) -> None:
        super().__init__()
        self.owner = owner

    def add(self, line: str) -> None:
        text = line.strip()
        self.owner.error = f"{self.owner.error}\n{text}" if self.owner.error else text


# -- results in a trace -------------------------------------------------------------------------------
_SPEW_STRING = r'\(string\) \(len=\d+\) ("(?:[^"\\]|\\.)*")'
_MSG = re.compile(r"^ Msg: " + _SPEW_STRING + ",?$")
_ACTION = re.compile(r"^ EnforcementAction: " + _SPEW_STRING + ",?$")
_SCOPED_NIL = re.compile(r"^ ScopedEnforcementActions: \(\[\]string\) <nil>,?$")
_SCOPED_START = re.compile(r"^ ScopedEnforcementActions: \(\[\]string\) \(len=\d+ cap=\d+\) \{$")
_SCOPED_ITEM = re.compile(r"^  " + _SPEW_STRING + ",?$")


def _rows(trace: list[str]) -> list[Row]:
    rows: list[Row] = []
    if (trace and trace[0].startswith("{")) or any(t.startswith("{") for t in trace):
        for line in trace:
            if line.startswith("{"):
                item = json.loads(line)
                rows.append(
                    (
                        item["msg"],
                        item["enforcementAction"],
                        tuple(sorted(item.get("scopedEnforcementActions") or ())),
                    )
                )
        return rows
    msg: str | None = None
    action = ""
    scoped: list[str] | None = None
    for line in trace:
        if m := _MSG.match(line):
            msg = go_unquote(m.group(1))
        elif m := _ACTION.match(line):
            action = go_unquote(m.group(1))
        elif _SCOPED_NIL.match(line):
            assert msg is not None, trace
            rows.append((msg, action, ()))
            msg, action = None, ""
        elif _SCOPED_START.match(line):
            scoped = []
        elif scoped is not None and (m := _SCOPED_ITEM.match(line)):
            scoped.append(go_unquote(m.group(1)))
        elif scoped is not None and line.startswith(" }"):
            assert msg is not None, trace
            rows.append((msg, action, tuple(sorted(scoped))))
            msg, action, scoped = None, "", None
    return rows


_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
}


def go_unquote(quoted: str) -> str:
    """strconv.Unquote for a double-quoted Go string (as strconv.Quote writes it)."""
    body = quoted[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode()
            i += 1
            continue
        kind = body[i + 1]
        if kind in _ESCAPES:
            out += _ESCAPES[kind].encode()
            i += 2
        elif kind == "x":
            out.append(int(body[i + 2 : i + 4], 16))
            i += 4
        elif kind == "u":
            out += chr(int(body[i + 2 : i + 6], 16)).encode()
            i += 6
        elif kind == "U":
            out += chr(int(body[i + 2 : i + 10], 16)).encode()
            i += 10
        else:  # octal \NNN
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
    return out.decode("utf-8", errors="surrogateescape")
