"""PolicySet: built from documents in any order, broken documents reported and left out, indexed by kind."""

from __future__ import annotations

import subprocess
import sys

from celkeeper.cel.api import Engine
from celkeeper.documents import Document
from celkeeper.policy import PolicySet, TemplateCompiler, build_policy_set
from tests.support.policydocs import constraint_doc, docs, template_doc
from tests.support.samples import library, read_documents

ALWAYS = [{"expression": "false", "message": "always"}]


def build(engine: Engine, documents: list[Document]) -> PolicySet:
    return build_policy_set(documents, TemplateCompiler(engine))


def test_documents_in_any_order(default_engine: Engine) -> None:
    policies = build(
        default_engine,
        [
            constraint_doc("K8sA", "a1"),
            template_doc("K8sA", ALWAYS),
            Document.from_object({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ignored"}}),
            constraint_doc("K8sA", "a0"),
        ],
    )
    assert policies.errors == ()
    assert list(policies.templates) == ["k8sa"]
    assert [(c.kind, c.name) for c in policies.constraints] == [("K8sA", "a0"), ("K8sA", "a1")]
    assert policies.engine is default_engine
    assert policies.template_for_kind("K8sA") is policies.templates["k8sa"]


def test_broken_documents_are_reported_and_left_out(default_engine: Engine) -> None:
    found = docs(
        """
        apiVersion: templates.gatekeeper.sh/v1
        kind: ConstraintTemplate
        metadata: {name: k8sgood}
        spec:
          crd: {spec: {names: {kind: K8sGood}}}
          targets:
            - target: admission.k8s.gatekeeper.sh
              code:
                - engine: K8sNativeValidation
                  source:
                    validations: [{expression: "false"}]
        ---
        apiVersion: templates.gatekeeper.sh/v1
        kind: ConstraintTemplate
        metadata: {name: k8sbad}
        spec:
          crd: {spec: {names: {kind: K8sBad}}}
          targets:
            - target: admission.k8s.gatekeeper.sh
              rego: package x
        ---
        apiVersion: constraints.gatekeeper.sh/v1beta1
        kind: K8sBad
        metadata: {name: uses-bad}
        ---
        apiVersion: constraints.gatekeeper.sh/v1beta1
        kind: K8sGood
        metadata: {name: fine}
        ---
        apiVersion: constraints.gatekeeper.sh/v1beta1
        kind: K8sGood
        metadata: {name: bad-match}
        spec:
          match: {namespaces: [BAD]}
        ---
        apiVersion: constraints.gatekeeper.sh/v1beta1
        kind: K8sGood
        metadata: {name: fine}
        """,
        "all.yaml",
    )
    policies = build(default_engine, found)
    assert [str(e) for e in policies.errors] == [
        "all.yaml:19:7: document 2: spec.targets[0]: template k8sbad: Rego is not supported; add "
        "K8sNativeValidation code",
        "all.yaml:23:7: document 3: kind: constraint K8sBad/uses-bad: the ConstraintTemplate for kind "
        "'K8sBad' "
        "is invalid (see its errors)",
        "all.yaml:34:24: document 5: spec.match.namespaces[0]: constraint K8sGood/bad-match: 'BAD' must be a "
        "namespace name, optionally with * at the start and/or end",
        "all.yaml:38:18: document 6: metadata.name: constraint K8sGood/fine: defined twice (first at "
        "all.yaml:28:18: "
        "document 4: metadata.name); this one is ignored",
    ]
    assert list(policies.templates) == ["k8sgood"]
    assert [(c.kind, c.name) for c in policies.constraints] == [("K8sGood", "fine")]
    assert policies.constraints[0].document.index == 4


def test_a_template_that_does_not_compile_is_kept(default_engine: Engine) -> None:
    policies = build(
        default_engine,
        [
            template_doc("K8sC", [{"expression": "nope"}]),
            constraint_doc("K8sC", "c"),
        ],
    )
    assert len(policies.errors) == 1
    assert "validation does not compile: undeclared reference to 'nope'" in str(policies.errors[0])
    assert [c.name for c in policies.constraints] == ["c"]


def test_duplicate_templates(default_engine: Engine) -> None:
    policies = build(default_engine, [template_doc("K8sA", ALWAYS), template_doc("K8sA", ALWAYS)])
    assert [str(e) for e in policies.errors] == [
        "k8sa.yaml: document 1: metadata.name: template k8sa: defined twice (first at k8sa.yaml: document 1: "
        "metadata.name); this one is ignored"
    ]


def test_candidates_are_indexed_by_group_and_kind(default_engine: Engine) -> None:
    kinds = {
        "pods": {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]},
        "deployments": {"kinds": [{"apiGroups": ["apps"], "kinds": ["Deployment"]}]},
        "any-group-pods": {"kinds": [{"apiGroups": ["*"], "kinds": ["Pod"]}]},
        "all-apps": {"kinds": [{"apiGroups": ["apps"], "kinds": ["*"]}]},
        "everything": {},
        "empty-kinds": {"kinds": [{}]},
        "two": {
            "kinds": [
                {"apiGroups": [""], "kinds": ["Pod", "Service"]},
                {"apiGroups": ["apps"], "kinds": ["Pod"]},
            ]
        },
    }
    documents = [template_doc("K8sA", ALWAYS)]
    documents += [constraint_doc("K8sA", name, match=match) for name, match in kinds.items()]
    policies = build(default_engine, documents)
    assert policies.errors == ()

    def names(group: str, kind: str) -> list[str]:
        return [c.constraint.name for c in policies.candidates(group, kind)]

    assert names("", "Pod") == ["any-group-pods", "empty-kinds", "everything", "pods", "two"]
    assert names("apps", "Deployment") == ["all-apps", "deployments", "empty-kinds", "everything"]
    assert names("apps", "Pod") == ["all-apps", "any-group-pods", "empty-kinds", "everything", "two"]
    assert names("", "ConfigMap") == ["empty-kinds", "everything"]
    assert names("", "Service") == ["empty-kinds", "everything", "two"]
    # memoised: the same tuple again
    assert policies.candidates("", "Pod") is policies.candidates("", "Pod")


def test_non_matching_constraints_are_not_candidates(default_engine: Engine) -> None:
    documents = [template_doc("K8sA", ALWAYS)]
    documents += [
        constraint_doc("K8sA", f"svc-{i}", match={"kinds": [{"apiGroups": [""], "kinds": [f"Kind{i}"]}]})
        for i in range(200)
    ]
    documents.append(constraint_doc("K8sA", "pods", match={"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]}))
    policies = build(default_engine, documents)
    assert len(policies.constraints) == 201
    assert [c.constraint.name for c in policies.candidates("", "Pod")] == ["pods"]


def test_library_samples_build(default_engine: Engine) -> None:
    files = sorted(
        p for p in library().glob("**/*.yaml") if p.name == "template.yaml" or p.name == "constraint.yaml"
    )
    documents = [d for p in files for d in read_documents(p)]
    policies = build(default_engine, documents)
    assert policies.errors == (), [str(e) for e in policies.errors]
    assert len(policies.templates) == len([p for p in files if p.name == "template.yaml"])
    assert len(policies.constraints) == len([p for p in files if p.name == "constraint.yaml"])


def test_a_policy_set_without_mutators_has_an_empty_mutator_set(default_engine: Engine) -> None:
    """Built without importing the mutation System (it is made when asked for): the same empty set."""
    policies = build(default_engine, [template_doc("K8sA", ALWAYS), constraint_doc("K8sA", "a")])
    assert len(policies.mutators) == 0
    assert policies.mutators.errors == ()
    assert policies.mutators is policies.mutators


def test_building_a_policy_set_without_mutators_does_not_import_the_mutation_system() -> None:
    program = (
        "import sys\n"
        "from celkeeper.cel import get_engine\n"
        "from celkeeper.documents import Document\n"
        "from celkeeper.policy import TemplateCompiler, build_policy_set\n"
        "pod = Document.from_object({'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'p'}})\n"
        "build_policy_set([pod], TemplateCompiler(get_engine('cel-python')))\n"
        "print('celkeeper.mutation.mutators' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["False"]
