"""SARIF 2.1.0 for code-scanning views (`celkeeper verify -o sarif`, `celkeeper test -o sarif`): each finding
at the file and line it is about, so that a pull request shows it on the manifest.

test: a result per violation, at the reviewed object's first line in its file; `ruleId` the constraint
(`<kind>/<name>`, described among the driver's rules with its template), `level` error (deny), warning
(warn) or note (dryrun); what could not be loaded or checked is a toolExecutionNotification.
verify: a result per failed case (or test that failed before its cases ran), at the case's line in the
Suite file, `ruleId` the Suite's test, level error; a Suite or file that could not be read is a
toolExecutionNotification.

Paths are relative to the working directory when they are under it (as code-scanning uploads expect),
else absolute; standard input is `stdin`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from celkeeper import __version__
from celkeeper.cli.output_junit import Row, object_id, reviewed
from celkeeper.documents import parse_documents
from celkeeper.gator.suite import is_suite
from celkeeper.gator.suiteresults import SuiteResult
from celkeeper.gator.violation import Violation
from celkeeper.model import JsonObject, JsonValue

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
VERSION = "2.1.0"
INFORMATION_URI = "https://github.com/celkeeper/celkeeper"
LEVELS = {"deny": "error", "warn": "warning", "dryrun": "note"}


def uri(path: str) -> str:
    if path in ("-", "<stdin>", ""):
        return "stdin"
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return resolved.as_uri()


def _location(path: str, line: int | None) -> JsonObject:
    physical: JsonObject = {"artifactLocation": {"uri": uri(path)}}
    if line:
        physical["region"] = {"startLine": line}
    return {"physicalLocation": physical}


def _log(tool: str, rules: Sequence[JsonObject], results: list[JsonObject], notes: Sequence[str]) -> str:
    run: JsonObject = {
        "tool": {
            "driver": {
                "name": "celkeeper",
                "version": __version__,
                "informationUri": INFORMATION_URI,
                "rules": list(rules),
            }
        },
        "automationDetails": {"id": f"celkeeper/{tool}/"},
        "results": results,
        "invocations": [
            {
                "executionSuccessful": not notes,
                "toolExecutionNotifications": [
                    {"level": "error", "message": {"text": note}} for note in notes
                ],
            }
        ],
    }
    return (
        json.dumps({"$schema": SCHEMA, "version": VERSION, "runs": [run]}, indent=2, ensure_ascii=False)
        + "\n"
    )


# -- test -------------------------------------------------------------------------------------------------
def _level(violation: Violation) -> str:
    if violation.scoped_actions:
        return (
            LEVELS["deny"]
            if "deny" in violation.scoped_actions
            else LEVELS.get(violation.scoped_actions[0], "note")
        )
    return LEVELS.get(violation.enforcement_action, "note")


def sarif_test(rows: Sequence[Row], problems: Sequence[str] = ()) -> str:
    """`celkeeper test -o sarif`: a result per violation, at its object's line."""
    rules: dict[str, JsonObject] = {}
    results: list[JsonObject] = []
    for document, constraint, violation in rows:
        kind, name = violation.constraint
        rule = f"{kind}/{name}"
        if rule not in rules:
            rules[rule] = {
                "id": rule,
                "name": kind,
                "shortDescription": {"text": f"constraint {name} of template {kind.lower()}"},
                "properties": {"enforcementAction": _constraint_action(constraint, violation)},
            }
        span = document.span("")
        results.append(
            {
                "ruleId": rule,
                "level": _level(violation),
                "message": {"text": f"{object_id(document)}: [{name}] {violation.message}"},
                "locations": [_location(document.file, span.line if span is not None else None)],
                "properties": {
                    "enforcementAction": violation.enforcement_action,
                    "scopedActions": list(violation.scoped_actions),
                    "document": document.index,
                    "object": dict(_identity(reviewed(document))),
                },
            }
        )
    return _log("test", sorted(rules.values(), key=lambda r: str(r["id"])), results, problems)


def _constraint_action(constraint: Mapping[str, JsonValue] | None, violation: Violation) -> str:
    spec = constraint.get("spec") if isinstance(constraint, Mapping) else None
    action = spec.get("enforcementAction") if isinstance(spec, Mapping) else None
    return str(action) if action else violation.enforcement_action


def _identity(obj: Mapping[str, JsonValue]) -> dict[str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return {
        "apiVersion": str(obj.get("apiVersion") or ""),
        "kind": str(obj.get("kind") or ""),
        "namespace": str(meta.get("namespace") or ""),
        "name": str(meta.get("name") or ""),
    }


# -- verify -----------------------------------------------------------------------------------------------
Locator = Callable[[str, int, int | None], int | None]


def suite_lines(path: str, test: int, case: int | None) -> int | None:
    """The line of `tests[test]` (or of its `cases[case]`) in the Suite file at `path` (None if unknown)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    for document in parse_documents(text, path).documents:
        if is_suite(document):
            where = f"tests[{test}]" + (f".cases[{case}]" if case is not None else "")
            return document.location(where).line
    return None


def sarif_verify(
    results: Sequence[SuiteResult], errors: Sequence[str] = (), locate: Locator = suite_lines
) -> str:
    """`celkeeper verify -o sarif`: a result per failed case or test, at its line in the Suite."""
    found: list[JsonObject] = []
    rules: dict[str, JsonObject] = {}
    notes = list(errors)
    for suite in results:
        if suite.error is not None:
            notes.append(f"{suite.path}: {suite.error}")
            continue
        for t, test in enumerate(suite.tests):
            failures: list[tuple[int | None, str, str]] = []
            if test.error is not None:
                failures.append((None, test.name, test.error))
            failures.extend(
                (c, case.name, case.error) for c, case in enumerate(test.cases) if case.error is not None
            )
            for case_index, name, message in failures:
                rules.setdefault(
                    test.name, {"id": test.name, "shortDescription": {"text": f"Suite test {test.name}"}}
                )
                found.append(
                    {
                        "ruleId": test.name,
                        "level": "error",
                        "message": {
                            "text": f"{test.name}/{name}: {message}" if case_index is not None else message
                        },
                        "locations": [_location(suite.path, locate(suite.path, t, case_index))],
                    }
                )
    return _log("verify", sorted(rules.values(), key=lambda r: str(r["id"])), found, notes)
