"""Explanations (review.explain): the same decision as decide's on every example, referential (synced data)
and suite case, at the webhook's and gator's enforcement points, on both engines; and what they say on the
examples - a namespaceSelector that does not select, a variable that fails, a template that does not
compile, the template file's line:col of every part."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from celkeeper.cel.api import Engine
from celkeeper.cli import files
from celkeeper.cli.verify import discover
from celkeeper.documents import Document, parse_documents
from celkeeper.gator import Filter, Runner
from celkeeper.gator.backend import PolicyBackend, verify_namespace
from celkeeper.gator.kinds import is_namespace, is_policy_document
from celkeeper.gator.violation import Violation
from celkeeper.model import EnforcementPoint
from celkeeper.policy import PolicySet, build_policy_set
from celkeeper.review import SyncedData, admission_review_for, decide, parse_admission_review
from celkeeper.review.explain import NOT_SELECTED, PASSED, VIOLATED, Explanation, explain
from celkeeper.review.explain_text import render_text
from celkeeper.templates import TemplateCompiler
from tests.support.samples import LIBRARY, present

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
REFERENTIAL = ROOT / "referential"  # templates that read synced data (the suites' inventories)


# -- the same decision ----------------------------------------------------------------------------------
class ComparingBackend(PolicyBackend):
    """Reviews as `celkeeper verify` does, and on each case also explains: at gator's point (what verify
    decides) and, for plain objects, at the webhook's (the object as a CREATE). Records every case where
    the explanation's decision differs from decide's."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine.name)
        self.compiler = TemplateCompiler(engine)
        self.compared = 0
        self.differences: list[str] = []

    def review(self, policies: PolicySet, obj: Document, inventory: Sequence[Document]) -> list[Violation]:
        namespaces = {d.name: d.data for d in inventory if is_namespace(d)}
        request, expand = self.request(obj)
        with self.inventory(policies, inventory) as data:  # the case's synced data, as verify gives it
            self._compare(obj, request, policies, namespaces, EnforcementPoint.CLI, expand, data)
            if expand and isinstance(obj.data, dict) and obj.data.get("apiVersion") and obj.data.get("kind"):
                webhook = parse_admission_review(admission_review_for(obj.data))
                self._compare(obj, webhook, policies, namespaces, EnforcementPoint.WEBHOOK, True, data)
        return super().review(policies, obj, inventory)

    def _compare(
        self,
        obj: Document,
        request: Any,
        policies: PolicySet,
        namespaces: Mapping[str, Any],
        point: EnforcementPoint,
        expand: bool,
        data: SyncedData | None,
    ) -> None:
        where = verify_namespace if point is EnforcementPoint.CLI else None  # as verify expands
        try:
            plain = decide(
                request, policies, namespaces.get, point, expand=expand, expansion_namespace=where, data=data
            )
        except Exception as err:
            with pytest.raises(type(err)):
                explain(
                    request,
                    policies,
                    namespaces.get,
                    point,
                    expand=expand,
                    expansion_namespace=where,
                    data=data,
                )
            return
        explained = explain(
            request, policies, namespaces.get, point, expand=expand, expansion_namespace=where, data=data
        )
        self.compared += 1
        if explained.decision.results != plain.results:
            self.differences.append(f"{obj.file} at {point}: {explained.decision.results} != {plain.results}")
        listed = [r for o in explained.objects for r in o.results]
        if listed != list(plain.results):
            self.differences.append(f"{obj.file} at {point}: per object {listed} != {plain.results}")
        render_text(explained)  # renders whatever it holds
        explained.to_json()


def _suites(with_library: bool) -> list[Path]:
    roots = [EXAMPLES, REFERENTIAL] + ([LIBRARY] if with_library and present() else [])
    found: list[Path] = []
    for root in roots:
        found += sorted(p for p in root.rglob("*.yaml") if "kind: Suite" in p.read_text(errors="replace"))
    return found


def _run_suites(backend: ComparingBackend, paths: list[Path]) -> int:
    runner = Runner(files.read, backend)
    parsed, errors = discover([str(p) for p in paths])
    assert not errors
    failed = 0
    for suite in parsed:
        result = runner.run(suite, Filter())  # type: ignore[arg-type]
        failed += result.failed
    return failed


def test_explaining_decides_as_decide_on_every_example_and_library_case(engine: Engine) -> None:
    if engine.name == "cel-python":  # ~200x slower: the examples (every feature) suffice
        paths = _suites(with_library=False)
    else:
        if not present():
            pytest.skip("the Gatekeeper library samples are absent")
        paths = _suites(with_library=True)
    backend = ComparingBackend(engine)
    failed = _run_suites(backend, paths)
    assert backend.differences == []
    assert failed == 0  # the suites themselves pass while explained
    assert backend.compared > (150 if engine.name == "cel-go" else 120), backend.compared


# -- what explanations say -------------------------------------------------------------------------------
def _policies(
    engine: Engine, *folders: Path, extra: Sequence[Document] = ()
) -> tuple[PolicySet, dict[str, Any]]:
    documents: list[Document] = list(extra)
    for folder in folders:
        for path in sorted(folder.rglob("*.yaml")):
            parsed = parse_documents(path.read_text(), str(path))
            documents += parsed.documents
    policies = build_policy_set([d for d in documents if is_policy_document(d)], TemplateCompiler(engine))
    namespaces = {d.name: d.data for d in documents if is_namespace(d)}
    return policies, namespaces


def _object(path: Path) -> dict[str, Any]:
    (document,) = parse_documents(path.read_text(), str(path)).documents
    assert isinstance(document.data, dict)
    return document.data


def _webhook(
    policies: PolicySet, namespaces: Mapping[str, Any], obj: dict[str, Any], **kw: Any
) -> Explanation:
    request = parse_admission_review(admission_review_for(obj, **kw))
    return explain(request, policies, namespaces.get, EnforcementPoint.WEBHOOK)


def _entry(explanation: Explanation, name: str, index: int = 0) -> Any:
    (found,) = [c for c in explanation.objects[index].constraints if c.name == name]
    return found


def test_a_namespace_selector_that_does_not_select(engine: Engine) -> None:
    policies, namespaces = _policies(engine, EXAMPLES / "seccomp")
    obj = _object(EXAMPLES / "seccomp" / "objects" / "other-namespace.yaml")
    explained = _webhook(policies, namespaces, obj)
    entry = _entry(explained, "restricted-namespaces-seccomp")
    assert (entry.status, entry.reason) == (NOT_SELECTED, "namespaceSelector")
    namespace = obj["metadata"]["namespace"]
    labels = namespaces[namespace]["metadata"].get("labels", {})
    assert '{"matchLabels":{"security.example.com/profile":"restricted"}}' in entry.detail
    assert f"namespace {namespace!r}" in entry.detail
    assert all(f'"{k}":"{v}"' in entry.detail for k, v in labels.items())
    assert explained.allowed and not entry.parts
    text = render_text(explained)
    assert (
        f"CKSeccomp/restricted-namespaces-seccomp  not selected (namespaceSelector): {entry.detail}" in text
    )
    # the same Pod in a namespace that opted in is evaluated: every part is shown
    disallowed = _object(EXAMPLES / "seccomp" / "objects" / "disallowed.yaml")
    entry = _entry(_webhook(policies, namespaces, disallowed), "restricted-namespaces-seccomp")
    assert entry.status == VIOLATED and entry.parts and entry.results


def test_every_part_is_located_in_the_template_file(engine: Engine) -> None:
    policies, namespaces = _policies(engine, EXAMPLES / "replica-limits")
    obj = _object(EXAMPLES / "replica-limits" / "objects" / "disallowed-too-many.yaml")
    explained = _webhook(policies, namespaces, obj)
    entry = _entry(explained, "replicas-between-2-and-10")
    template_file = str(EXAMPLES / "replica-limits" / "template.yaml")
    lines = Path(template_file).read_text().splitlines()
    by_name = {p.name: p for p in entry.parts if p.part == "variable"}
    assert set(by_name) == {"min", "max", "replicas", "oldReplicas", "inRange", "improving"}
    assert by_name["max"].value == 10 and by_name["replicas"].value == obj["spec"]["replicas"]
    assert by_name["inRange"].value is False
    for part in entry.parts:
        assert part.location.file == template_file
        assert part.location.line is not None and part.location.column is not None
        line = lines[part.location.line - 1]
        key = "messageExpression:" if part.part == "messageExpression" else "expression:"
        assert line[: part.location.column - 1].rstrip().endswith(key), (part, line)
    (condition,) = [p for p in entry.parts if p.part == "matchCondition"]
    assert (condition.name, condition.value, condition.evaluated) == ("has-replicas", True, True)
    (validation,) = [p for p in entry.parts if p.part == "validation"]
    assert validation.value is False and validation.error is None
    (message,) = [p for p in entry.parts if p.part == "messageExpression"]
    assert message.value == entry.results[0].message
    if engine.name == "cel-go":  # the cost each part took from the budget
        assert validation.cost is not None and validation.cost > 0
    assert not explained.allowed


def _explain_broken(engine: Engine, tmp_path: Path, old: str, new: str) -> tuple[Path, Explanation, Any]:
    """examples/replica-limits with `old` replaced by `new` in its template, its too-many case explained
    as the webhook decides it: the folder, the explanation and the constraint's entry."""
    folder = tmp_path / "replica-limits"
    shutil.copytree(EXAMPLES / "replica-limits", folder)
    template = folder / "template.yaml"
    text = template.read_text()
    assert old in text
    template.write_text(text.replace(old, new))
    policies, namespaces = _policies(engine, folder)
    explained = _webhook(policies, namespaces, _object(folder / "objects" / "disallowed-too-many.yaml"))
    return folder, explained, _entry(explained, "replicas-between-2-and-10")


def test_a_failing_variable(engine: Engine, tmp_path: Path) -> None:
    folder, explained, entry = _explain_broken(
        engine,
        tmp_path,
        "expression: int(variables.anyObject.spec.replicas)",
        "expression: int(variables.anyObject.spec.replicaz)",
    )
    (replicas,) = [p for p in entry.parts if p.name == "replicas"]
    assert replicas.error is not None and "no such key: replicaz" in replicas.error
    assert replicas.location.file == str(folder / "template.yaml")
    (validation,) = [p for p in entry.parts if p.part == "validation"]
    assert validation.error is not None
    if engine.name == "cel-go":  # Kubernetes' wording: the variable's own error, inside the validation's
        assert 'composited variable "replicas" fails to evaluate: no such key: replicaz' in validation.error
    # the error is a violation under failurePolicy Fail, as the webhook decides
    assert entry.status == VIOLATED and [d.evaluation for d in entry.decisions] == ["error"]
    assert [r.message for r in entry.results] == [validation.error]
    text = render_text(explained)
    assert "variable replicas" in text and "error: " in text and "replicaz" in text


def test_a_template_that_does_not_compile(engine: Engine, tmp_path: Path) -> None:
    folder, explained, entry = _explain_broken(
        engine,
        tmp_path,
        "expression: variables.inRange || variables.improving",
        "expression: variables.inRange || variables.improving ||| true",
    )
    (validation,) = [p for p in entry.parts if p.part == "validation"]
    assert validation.compile_errors, validation
    where = validation.compile_errors[0].location
    template = folder / "template.yaml"
    line = template.read_text().splitlines()[where.line - 1]  # type: ignore[operator]
    assert where.file == str(template) and "|||" in line
    assert line[where.column - 1 :].startswith("|"), (where, line)  # type: ignore[operator]
    assert validation.error is not None and validation.error.startswith("compilation error")
    assert entry.status == VIOLATED
    text = render_text(explained)
    assert f"compile error at {template}:{where.line}:{where.column}:" in text
    json_part = next(
        p
        for o in explained.to_json()["objects"]
        for c in o["constraints"]
        if c["name"] == entry.name
        for p in c["parts"]
        if p["part"] == "validation"
    )
    assert json_part["compileErrors"][0]["location"]["line"] == where.line


def test_constraints_not_evaluated_say_why(engine: Engine) -> None:
    policies, namespaces = _policies(engine, EXAMPLES)
    obj = _object(EXAMPLES / "privileged-containers" / "objects" / "disallowed.yaml")
    explained = _webhook(policies, namespaces, obj)
    entries = {c.name: c for c in explained.objects[0].constraints}
    assert len(entries) == len(policies.constraints)  # every constraint is accounted for
    assert entries["block-nodeport-services"].reason == "kinds"
    assert "Pod (core group)" in entries["block-nodeport-services"].detail
    assert entries["no-privileged-containers"].status == VIOLATED
    # scoped: deny at the webhook, and an update-only template is not selected for a CREATE
    assert entries["replicas-between-2-and-10"].reason == "kinds"
    statuses = {c.status for c in entries.values()}
    assert statuses <= {VIOLATED, PASSED, NOT_SELECTED, "skipped"}


def test_explained_as_json_values_are_truncated(engine: Engine) -> None:
    policies, namespaces = _policies(engine, EXAMPLES / "allowed-registries")
    obj = _object(EXAMPLES / "allowed-registries" / "objects" / "disallowed.yaml")
    containers = [dict(obj["spec"]["containers"][0], name=f"c{i}") for i in range(30)]
    obj = dict(obj, spec=dict(obj["spec"], containers=containers))
    explained = _webhook(policies, namespaces, obj)
    (violated,) = [c for c in explained.objects[0].constraints if c.status == VIOLATED]
    (kept,) = [p for p in violated.parts if p.name == "containers"]
    assert len(kept.value) >= 30  # the explanation keeps the value; JSON shows 20 items
    data = explained.to_json()
    (entry,) = [c for c in data["objects"][0]["constraints"] if c["status"] == VIOLATED]
    (containers_part,) = [p for p in entry["parts"] if p.get("name") == "containers"]
    assert len(containers_part["value"]) == 21
    assert containers_part["value"][-1] == f"… {len(kept.value) - 20} more"
    assert data["allowed"] is False and data["results"][0]["enforcementAction"] == "deny"
