"""JUnit XML for CI systems (`celkeeper verify -o junit`, `celkeeper test -o junit`): the schema of Jenkins'
xunit plugin (junit-10.xsd), which GitLab, GitHub Actions' reporters, Azure DevOps and Jenkins read.

verify: a <testsuite> per Suite file (`file` its path), a <testcase> per case (`classname` its test,
`name` the case), a failure with the case's message; a test that fails before its cases run (its template
or constraint cannot be loaded, an `invalid: true` expectation) is one testcase named after the test; skipped
tests and cases are <skipped/>; a Suite that cannot be read is an <error>, and so is each file that could not
be read at all (a testsuite `celkeeper verify`).

test: a <testsuite> per input file, a <testcase> per object and constraint that can select its kind (or
that it violates: through an ExpansionTemplate), `classname` the object (`apiVersion/Kind
[namespace/]name`, document N of the file), `name` the constraint; a deny violation is a <failure> with its
messages, warn and dryrun violations pass with their messages in <system-out> (as the exit code: only deny
fails); what could not be loaded or checked is an <error> of a testsuite `celkeeper test`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from celkeeper.documents import Document
from celkeeper.gator.suiteresults import SuiteResult
from celkeeper.gator.violation import Violation
from celkeeper.model import JsonValue
from celkeeper.policy import PolicySet

# characters XML 1.0 cannot hold, even escaped
_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value: str) -> str:
    return _INVALID.sub("\ufffd", value)


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


def _first_line(text: str) -> str:
    return _text(text.strip().splitlines()[0] if text.strip() else text)


@dataclass
class _Suite:
    name: str
    file: str = ""
    cases: list[ET.Element] = field(default_factory=list)
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    time: float = 0.0

    def case(self, name: str, classname: str, time: float = 0.0) -> ET.Element:
        element = ET.Element(
            "testcase", {"name": _text(name), "classname": _text(classname), "time": _seconds(time)}
        )
        self.cases.append(element)
        return element

    def fail(self, case: ET.Element, message: str, kind: str = "failure") -> None:
        child = ET.SubElement(case, kind, {"message": _first_line(message), "type": kind})
        child.text = _text(message)
        if kind == "error":
            self.errors += 1
        else:
            self.failures += 1

    def skip(self, case: ET.Element) -> None:
        ET.SubElement(case, "skipped", {"message": "skipped"})
        self.skipped += 1

    def element(self) -> ET.Element:
        attrs = {
            "name": _text(self.name),
            "tests": str(len(self.cases)),
            "failures": str(self.failures),
            "errors": str(self.errors),
            "skipped": str(self.skipped),
            "time": _seconds(self.time),
        }
        if self.file:
            attrs["file"] = _text(self.file)
        suite = ET.Element("testsuite", attrs)
        suite.extend(self.cases)
        return suite


def _document(name: str, suites: Iterable[_Suite]) -> str:
    listed = list(suites)
    root = ET.Element(
        "testsuites",
        {
            "name": name,
            "tests": str(sum(len(s.cases) for s in listed)),
            "failures": str(sum(s.failures for s in listed)),
            "errors": str(sum(s.errors for s in listed)),
            "time": _seconds(sum(s.time for s in listed)),
        },
    )
    root.extend(s.element() for s in listed)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _errors_suite(name: str, errors: Sequence[str]) -> _Suite | None:
    if not errors:
        return None
    suite = _Suite(name)
    for error in errors:
        suite.fail(suite.case(_first_line(error), name), error, "error")
    return suite


# -- verify -----------------------------------------------------------------------------------------------
def junit_verify(results: Sequence[SuiteResult], errors: Sequence[str] = ()) -> str:
    """`celkeeper verify -o junit`: the suites' results (and the files that could not be read)."""
    suites = []
    for result in results:
        suite = _Suite(result.path, file=result.path, time=result.runtime)
        suites.append(suite)
        if result.error is not None:
            suite.fail(suite.case("(suite)", result.path), result.error, "error")
            continue
        if result.skipped:
            suite.skip(suite.case("(suite)", result.path))
            continue
        for test in result.tests:
            if test.skipped:
                for skipped in test.cases:
                    suite.skip(suite.case(skipped.name, test.name))
                if not test.cases:
                    suite.skip(suite.case(test.name, test.name))
                continue
            if test.error is not None or not test.cases:  # failed before its cases, or `invalid: true`
                whole = suite.case(test.name, test.name, test.runtime)
                if test.error is not None:
                    suite.fail(whole, test.error)
                continue
            for found in test.cases:
                element = suite.case(found.name, test.name, found.runtime)
                if found.skipped:
                    suite.skip(element)
                elif found.error is not None:
                    suite.fail(element, found.error)
    extra = _errors_suite("celkeeper verify", errors)
    return _document("celkeeper verify", [*suites, *([extra] if extra else [])])


# -- test -------------------------------------------------------------------------------------------------
Row = tuple[Document, Mapping[str, JsonValue] | None, Violation]  # reviewed document, its constraint, result


def object_id(document: Document) -> str:
    """`apiVersion/Kind [namespace/]name` of the reviewed object (an AdmissionReview's object)."""
    obj = reviewed(document)
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    head = f"{obj.get('apiVersion', '')}/{obj.get('kind', '')}"
    return f"{head} {namespace}/{name}" if namespace else f"{head} {name}"


def reviewed(document: Document) -> Mapping[str, JsonValue]:
    data = document.data if isinstance(document.data, dict) else {}
    if data.get("kind") == "AdmissionReview" and isinstance(data.get("request"), dict):
        request = data["request"]
        obj = request.get("object") or request.get("oldObject") or {}
        return obj if isinstance(obj, dict) else {}
    return data


def checks(
    documents: Sequence[Document], policies: PolicySet, rows: Sequence[Row]
) -> list[tuple[Document, tuple[str, str], list[Violation]]]:
    """Every (object, constraint) checked: the constraints that can select the object's kind, and any it
    violates; with its violations (in the order found)."""
    found: dict[tuple[int, tuple[str, str]], list[Violation]] = {}
    for document, _, violation in rows:
        found.setdefault((id(document), violation.constraint), []).append(violation)
    out: list[tuple[Document, tuple[str, str], list[Violation]]] = []
    for document in documents:
        obj = reviewed(document)
        group = str(obj.get("apiVersion") or "").rpartition("/")[0]
        keys = [
            (c.constraint.kind, c.constraint.name)
            for c in policies.candidates(group, str(obj.get("kind") or ""))
        ]
        keys += sorted(k for d, k in found if d == id(document) and k not in keys)
        out.extend((document, key, found.get((id(document), key), [])) for key in keys)
    return out


def _denies(violation: Violation) -> bool:
    return violation.enforcement_action == "deny" or "deny" in violation.scoped_actions


def _action(violation: Violation) -> str:
    if violation.scoped_actions:
        return f"{violation.enforcement_action}({','.join(violation.scoped_actions)})"
    return violation.enforcement_action


def junit_test(
    documents: Sequence[Document], policies: PolicySet, rows: Sequence[Row], problems: Sequence[str] = ()
) -> str:
    """`celkeeper test -o junit`: a testcase per object and constraint."""
    suites: dict[str, _Suite] = {}
    for document, (kind, name), violations in checks(documents, policies, rows):
        suite = suites.setdefault(document.file, _Suite(document.file, file=document.file))
        case = suite.case(f"{kind}/{name}", f"{object_id(document)} (document {document.index})")
        denied = [v for v in violations if _denies(v)]
        if denied:
            suite.fail(case, "\n".join(f"[{name}] {v.message}" for v in denied))
        others = [v for v in violations if not _denies(v)]
        if others:
            out = ET.SubElement(case, "system-out")
            out.text = _text("\n".join(f"{_action(v)}: [{name}] {v.message}" for v in others))
    extra = _errors_suite("celkeeper test", problems)
    return _document("celkeeper test", [*suites.values(), *([extra] if extra else [])])
