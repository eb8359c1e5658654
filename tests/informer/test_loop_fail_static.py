"""Fail-static policy loading (issue 12): the informer never replaces a good policy set with a smaller
or broken one by accident. Each case drives a real FolderSource and Informer over a real folder and
reads what they publish; tests/informer/test_loop_fail_static_serve.py checks the same through a server.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from celkeeper.documents import parse_documents
from celkeeper.informer import FolderSource, Informer
from celkeeper.model import EnforcementPoint
from celkeeper.policy import TemplateCompiler, build_policy_set
from celkeeper.review import decide, parse_admission_review
from celkeeper.settings import Settings
from celkeeper.snapshot import InformerRecord, Snapshot, StateDir
from celkeeper.snapshot.documents import DocumentCache
from tests.support.policyfiles import OWNER_CONSTRAINT, OWNER_TEMPLATE
from tests.support.serve import pod, review

TEMPLATE = OWNER_TEMPLATE
CONSTRAINT = OWNER_CONSTRAINT
NOT_COMPILING = TEMPLATE.replace("'owner' in object.metadata.labels", "'owner' in object.metadata.labels +")
BAD_YAML = TEMPLATE.replace("  name: k8srequiredowner", "  name: [k8srequiredowner")


class Setup:
    def __init__(self, root: Path, **source: object) -> None:
        self.policies = root / "policies"
        self.policies.mkdir()
        (self.policies / "template.yaml").write_text(TEMPLATE)
        (self.policies / "constraint.yaml").write_text(CONSTRAINT)
        self.state = StateDir(root / "state")
        self.state.reset()
        self.source_options = {"deletion_grace": 0.0, **source}
        self.informer = self.new_informer()

    def new_informer(self) -> Informer:
        source = FolderSource(self.policies, **self.source_options)  # type: ignore[arg-type]
        return Informer(source, self.state, Settings())

    def publish(self) -> Snapshot:
        self.informer.step()
        assert self.informer.last is not None
        return self.informer.last

    def denies_pod_without_owner(self, snapshot: Snapshot) -> list[str]:
        """The messages a Pod without labels gets from the published policies."""
        from celkeeper.cel import get_engine

        parsed = DocumentCache().policy_documents(snapshot.items)
        settings = Settings()
        policies = build_policy_set(
            parsed.documents, TemplateCompiler(get_engine(settings.engine, settings.limits))
        )
        request = parse_admission_review(review(pod(labels={})))
        decision = decide(request, policies, lambda _: None, EnforcementPoint.WEBHOOK)
        return [r.message for r in decision.results]


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    yield Setup(tmp_path)


def _text(snapshot: Snapshot, name: str) -> str:
    return next(i.text for i in snapshot.items if os.path.basename(i.name) == name)


def test_a_good_set_is_published_and_enforced(setup: Setup) -> None:
    snapshot = setup.publish()
    assert snapshot.held == () and snapshot.unproven == () and snapshot.problems == ()
    assert setup.denies_pod_without_owner(snapshot) == ["an owner label is required"]


@pytest.mark.parametrize(
    ("case", "change"),
    [
        ("invalid YAML", lambda p: (p / "template.yaml").write_text(BAD_YAML)),
        ("emptied", lambda p: (p / "template.yaml").write_text("")),
        ("only a comment left", lambda p: (p / "template.yaml").write_text("# rewritten soon\n")),
        ("not UTF-8", lambda p: (p / "template.yaml").write_bytes(b"\xff" + TEMPLATE.encode())),
        ("too large", lambda p: (p / "template.yaml").write_text(TEMPLATE + "#" * 20_000 + "\n")),
        ("stops compiling", lambda p: (p / "template.yaml").write_text(NOT_COMPILING)),
        (
            "invalid template",
            lambda p: (p / "template.yaml").write_text(TEMPLATE.replace("spec:\n  crd", "spex:\n  crd")),
        ),
    ],
)
def test_a_good_file_that_breaks_keeps_its_last_good_version(
    tmp_path: Path, case: str, change: object
) -> None:
    setup = Setup(tmp_path, max_file_bytes=10_000)
    good = setup.publish()
    change(setup.policies)  # type: ignore[operator]
    snapshot = setup.publish()
    template = str(setup.policies / "template.yaml")
    assert snapshot.held == (template,), case
    assert _text(snapshot, "template.yaml") == _text(good, "template.yaml")
    notes = [p for p in snapshot.problems if "keeping the last good version" in p]
    assert notes and all(template in p for p in notes), snapshot.problems
    assert setup.denies_pod_without_owner(snapshot) == ["an owner label is required"]  # still enforced
    status = InformerRecord(setup.state.informer).read()
    assert status is not None and status.held == (template,) and notes[0] in status.problems
    # fixed: the new version is published and the hold ends
    (setup.policies / "template.yaml").write_text(TEMPLATE.replace("an owner label", "an owner label really"))
    fixed = setup.publish()
    assert fixed.held == () and setup.denies_pod_without_owner(fixed) == ["an owner label really is required"]


def test_a_compile_error_is_reported_with_its_line_and_column(setup: Setup) -> None:
    setup.publish()
    (setup.policies / "template.yaml").write_text(NOT_COMPILING)
    snapshot = setup.publish()
    (note,) = [p for p in snapshot.problems if "keeping the last good version" in p]
    expression_line = (
        NOT_COMPILING.splitlines().index(
            next(line for line in NOT_COMPILING.splitlines() if "expression:" in line)
        )
        + 1
    )
    assert f"template.yaml:{expression_line}:" in note, note


def test_a_template_that_never_compiled_is_loaded_as_gatekeeper_loads_it(setup: Setup) -> None:
    (setup.policies / "template.yaml").write_text(NOT_COMPILING)
    snapshot = setup.publish()
    template = str(setup.policies / "template.yaml")
    assert snapshot.held == () and snapshot.unproven == (template,)
    (message,) = setup.denies_pod_without_owner(snapshot)  # failurePolicy Fail (the default): a violation
    assert "compil" in message.lower() or "syntax" in message.lower(), message
    # it becomes good once it compiles; a later break is then held back
    (setup.policies / "template.yaml").write_text(TEMPLATE)
    assert setup.publish().unproven == ()
    (setup.policies / "template.yaml").write_text(NOT_COMPILING)
    assert setup.publish().held == (template,)


def test_an_explicit_deletion_is_honoured(setup: Setup) -> None:
    setup.publish()
    (setup.policies / "constraint.yaml").unlink()
    snapshot = setup.publish()
    assert [os.path.basename(i.name) for i in snapshot.items] == ["template.yaml"]
    assert snapshot.held == () and setup.denies_pod_without_owner(snapshot) == []


def test_a_file_gone_for_a_moment_is_kept_until_the_grace_ends(tmp_path: Path) -> None:
    now = [100.0]
    setup = Setup(tmp_path, deletion_grace=1.0, clock=lambda: now[0])
    setup.publish()
    saved = (setup.policies / "constraint.yaml").read_text()
    (setup.policies / "constraint.yaml").unlink()
    assert len(setup.publish().items) == 2  # a tool replacing the file: not a deletion yet
    (setup.policies / "constraint.yaml").write_text(saved)
    assert len(setup.publish().items) == 2
    (setup.policies / "constraint.yaml").unlink()
    setup.publish()
    now[0] += 1.5
    assert len(setup.publish().items) == 1  # gone for longer than the grace: deleted


def test_a_vanished_folder_keeps_every_policy(setup: Setup) -> None:
    setup.publish()
    moved = setup.policies.with_name("moved")
    setup.policies.rename(moved)
    snapshot = setup.publish()
    assert len(snapshot.items) == 2 and setup.denies_pod_without_owner(snapshot) == [
        "an owner label is required"
    ]
    assert any("is missing" in p for p in snapshot.problems)
    moved.rename(setup.policies)
    back = setup.publish()
    assert len(back.items) == 2 and back.problems == ()


def test_a_constraint_edited_into_invalid_parameters_keeps_its_last_good_version(setup: Setup) -> None:
    template = TEMPLATE.replace(
        "        kind: K8sRequiredOwner\n",
        "        kind: K8sRequiredOwner\n      validation:\n        openAPIV3Schema:\n"
        "          type: object\n"
        "          properties:\n            label: {type: string}\n",
    )
    (setup.policies / "template.yaml").write_text(template)
    (setup.policies / "constraint.yaml").write_text(CONSTRAINT + "  parameters:\n    label: owner\n")
    setup.publish()
    (setup.policies / "constraint.yaml").write_text(CONSTRAINT + "  parameters:\n    label: [1, 2]\n")
    snapshot = setup.publish()
    assert snapshot.held == (str(setup.policies / "constraint.yaml"),)
    assert setup.denies_pod_without_owner(snapshot) == ["an owner label is required"]


def test_what_is_held_survives_an_informer_restart(setup: Setup) -> None:
    setup.publish()
    (setup.policies / "template.yaml").write_text(BAD_YAML)
    held = setup.publish()
    restarted = setup.new_informer()
    assert restarted.step() is None  # the same content: nothing new to publish
    (setup.policies / "constraint.yaml").write_text(CONSTRAINT.replace("owner-required", "owner-needed"))
    restarted.step()
    assert restarted.last is not None and restarted.last.held == held.held
    assert _text(restarted.last, "template.yaml") == TEMPLATE


def test_a_file_never_good_is_reported_and_not_loaded(setup: Setup) -> None:
    (setup.policies / "extra.yaml").write_bytes(b"\xfe\xff")
    snapshot = setup.publish()
    assert any("extra.yaml" in p and "UTF-8" in p for p in snapshot.problems)
    assert len(snapshot.items) == 2 and snapshot.held == ()


def test_parsing_is_bounded_against_alias_bombs() -> None:
    laughs = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    previous = "a"
    for name in "bcdefghij":  # 9**10 values if expanded
        laughs += f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]\n"
        previous = name
    parsed = parse_documents("apiVersion: v1\nkind: ConfigMap\n" + laughs, "bomb.yaml")
    assert parsed.documents == ()
    (error,) = parsed.errors
    assert "expands to more than" in str(error) and str(error).startswith("bomb.yaml:")


def test_aliases_within_bounds_still_work() -> None:
    parsed = parse_documents("a: &x {k: v}\nb: *x\nc: [*x, *x]\n", "ok.yaml")
    assert parsed.documents[0].data == {"a": {"k": "v"}, "b": {"k": "v"}, "c": [{"k": "v"}, {"k": "v"}]}


def test_json_files_are_held_too(setup: Setup) -> None:
    (setup.policies / "constraint.yaml").unlink()
    constraint = parse_documents(CONSTRAINT, "c").documents[0].data
    (setup.policies / "constraint.json").write_text(json.dumps(constraint))
    setup.publish()
    (setup.policies / "constraint.json").write_text(json.dumps(constraint)[:-5])  # half-written
    assert setup.publish().held == (str(setup.policies / "constraint.json"),)
    shutil.rmtree(setup.policies)


def test_parsing_stops_at_a_number_of_values(monkeypatch: pytest.MonkeyPatch) -> None:
    from celkeeper.documents import parse as parse_module

    monkeypatch.setattr(parse_module, "MAX_VALUES", 1000)
    parsed = parse_documents("items:\n" + "- {a: b}\n" * 400, "many.yaml")  # 1,202 values
    (error,) = parsed.errors
    assert str(error).startswith("many.yaml:") and "more than 1,000 values" in str(error)
    assert parse_documents("items:\n" + "- {a: b}\n" * 300, "fewer.yaml").errors == ()


VAP = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replicas
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [deployments]
  validations:
  - expression: object.spec.replicas <= 5
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: replicas
spec:
  policyName: replicas
  validationActions: [Deny]
"""


def test_an_enforced_admission_policy_that_breaks_keeps_its_last_good_version(tmp_path: Path) -> None:
    from tests.support.native import require_celgo

    require_celgo()
    setup = Setup(tmp_path)
    setup.informer = Informer(
        FolderSource(setup.policies, **setup.source_options),  # type: ignore[arg-type]
        setup.state,
        Settings().with_(enforce_admission_policies=True),
    )
    (setup.policies / "vap.yaml").write_text(VAP)
    good = setup.publish()
    assert good.held == () and _text(good, "vap.yaml") == VAP
    (setup.policies / "vap.yaml").write_text(VAP.replace("<= 5", "<= "))  # no longer compiles
    snapshot = setup.publish()
    assert snapshot.held == (str(setup.policies / "vap.yaml"),)
    assert _text(snapshot, "vap.yaml") == VAP
    (note,) = [p for p in snapshot.problems if "keeping the last good version" in p]
    assert "vap.yaml:13:40:" in note and "spec.validations[0].expression" in note, note
    # without enforcement the informer leaves admission policies to the API server: nothing is checked
    (tmp_path / "plain").mkdir()
    plain = Setup(tmp_path / "plain")
    (plain.policies / "vap.yaml").write_text(VAP.replace("<= 5", "<= "))
    assert all(os.path.basename(i.name) != "vap.yaml" for i in plain.publish().items)
