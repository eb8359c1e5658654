"""`celkeeper vap`: the objects on stdout (YAML or a JSON List), one line per problem on stderr with
file:line:col, and the exit code."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.vap import cases

ROOT = Path(__file__).resolve().parents[2]


def celkeeper(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "celkeeper", "vap", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


def test_the_examples_become_policies_bindings_and_one_refusal() -> None:
    proc = celkeeper("examples")
    assert proc.returncode == 1  # replica-limits cannot be a policy
    objects = list(YAML(typ="safe", pure=True).load_all(io.StringIO(proc.stdout)))
    kinds = [o["kind"] for o in objects]
    assert kinds.count("ValidatingAdmissionPolicy") == 18
    assert kinds.count("ValidatingAdmissionPolicyBinding") == 19
    names = {o["metadata"]["name"] for o in objects}
    assert "gatekeeper-ckreplicalimits" not in names and "gatekeeper-ckrequiredlabels" in names
    lines = proc.stderr.splitlines()
    (error,) = [line for line in lines if line.startswith("error: ")]
    assert error.startswith(
        "error: examples/replica-limits/template.yaml:31:29: document 1: "
        "spec.targets[0].code[0].source.matchCondition[0].expression: template ckreplicalimits: cannot be a "
        "ValidatingAdmissionPolicy: match condition 'has-replicas' reads variables"
    )
    warnings = [line for line in lines if line.startswith("warning: ")]
    (namespaces,) = [w for w in warnings if "validates every Namespace" in w]
    assert namespaces.startswith("warning: examples/required-labels/constraint-namespaces.yaml:10:25: ")
    # examples/workload-expansion's ExpansionTemplates generate Pods: every constraint on Pods is told
    # that the policy does not see them
    generated = [w for w in warnings if "objects ExpansionTemplates generate (Pod from " in w]
    assert "CKPrivilegedContainers/no-privileged-containers" in "".join(generated)
    assert len(generated) == len(warnings) - 1
    assert lines[-1] == "celkeeper vap: 18 policies, 19 bindings; 1 errors"


def test_yaml_keeps_gatekeeper_s_cel_byte_for_byte() -> None:
    """The match conditions hold tabs and blank lines: the YAML reads back to the very same strings."""
    from celkeeper.vap import snippets

    proc = celkeeper(str(cases.EXAMPLES / "block-service-types"))
    assert proc.returncode == 0, proc.stderr
    policy, binding = YAML(typ="safe", pure=True).load_all(io.StringIO(proc.stdout))
    conditions = {c["name"]: c["expression"] for c in policy["spec"]["matchConditions"]}
    assert conditions["gatekeeper_internal_match_kinds"] == snippets.MATCH_KINDS
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]


def test_json_is_a_list() -> None:
    proc = celkeeper(str(cases.EXAMPLES / "block-service-types"), "-o", "json")
    assert proc.returncode == 0
    listed = json.loads(proc.stdout)
    assert listed["kind"] == "List"
    assert [i["kind"] for i in listed["items"]] == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]


def test_without_the_default_only_templates_asking_for_one_get_a_policy(tmp_path: Path) -> None:
    on = cases.template("asks", {**cases.FULL_SOURCE, "generateVAP": True})
    off = cases.template("silent", cases.FULL_SOURCE)
    for name, data in (("asks.json", on), ("silent.json", off)):
        (tmp_path / name).write_text(json.dumps(data), encoding="utf-8")
    proc = celkeeper(str(tmp_path), "--no-default-create-vap-for-templates", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert [i["metadata"]["name"] for i in json.loads(proc.stdout)["items"]] == ["gatekeeper-asks"]
    assert "1 templates without generateVAP left out (silent)" in proc.stderr
    opted_out = cases.template("optout", {**cases.FULL_SOURCE, "generateVAP": False})
    (tmp_path / "asks.json").write_text(json.dumps(opted_out), encoding="utf-8")
    proc = celkeeper(str(tmp_path), "-o", "json")
    assert [i["metadata"]["name"] for i in json.loads(proc.stdout)["items"]] == ["gatekeeper-silent"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((), "give the files or folders of the templates and constraints, or --cluster"),
        (("examples", "--cluster"), "give PATHs or --cluster, not both"),
        (("no/such/dir",), "no/such/dir: no such file or directory"),
    ],
)
def test_usage_errors_are_one_line(args: tuple[str, ...], words: str) -> None:
    proc = celkeeper(*args)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"celkeeper vap: {words}"


def test_lint_reports_templates_asking_for_a_policy_they_cannot_be(tmp_path: Path) -> None:
    source = {
        "generateVAP": True,
        "variables": [{"name": "n", "expression": "object.metadata.name"}],
        "matchCondition": [{"name": "named", "expression": 'variables.n != ""'}],
        "validations": [{"expression": "true", "message": "m"}],
    }
    (tmp_path / "t.json").write_text(json.dumps(cases.template("asks", source)), encoding="utf-8")
    (tmp_path / "quiet.json").write_text(json.dumps(cases.template("quiet")), encoding="utf-8")
    scoped = cases.constraint(
        "Quiet",
        "api-server-only",
        {
            "enforcementAction": "scoped",
            "scopedEnforcementActions": [{"action": "deny", "enforcementPoints": [{"name": "vap.k8s.io"}]}],
        },
    )
    (tmp_path / "c.json").write_text(json.dumps(scoped), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "celkeeper", "lint", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert any(
        "template asks: cannot be a ValidatingAdmissionPolicy: match condition 'named' reads" in x
        for x in lines
    ), lines
    assert any(
        "constraint Quiet/api-server-only: no ValidatingAdmissionPolicyBinding: it is scoped to vap.k8s.io"
        in x
        for x in lines
    ), lines
    assert len(lines) == 2


def test_the_webhook_s_scope_and_exempt_namespaces(tmp_path: Path) -> None:
    """--webhook-config takes the scope of celkeeper's webhook (its rules, selectors, matchPolicy, match
    conditions) as Gatekeeper's --sync-vap-enforcement-scope does; the objects are the golden test's."""
    from celkeeper.vap import snippets

    webhook = cases.scopes()["celkeeper-webhook"]["webhook"]
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "celkeeper-validating-webhook-configuration"},
        "webhooks": [{"name": "check-policies.celkeeper.io"}, {"name": "validation.celkeeper.io", **webhook}],
    }
    (tmp_path / "vwc.json").write_text(json.dumps(config), encoding="utf-8")
    args = [str(cases.EXAMPLES / "block-service-types"), "--webhook-config", str(tmp_path / "vwc.json")]
    proc = celkeeper(*args, "--exempt-namespace", "kube-system", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    policy = json.loads(proc.stdout)["items"][0]
    match = policy["spec"]["matchConstraints"]
    assert match["namespaceSelector"] == webhook["namespaceSelector"] and match["matchPolicy"] == "Exact"
    assert match["resourceRules"] == webhook["rules"]
    exempted = policy["spec"]["matchConditions"][-1]
    assert exempted == snippets.global_exempted_namespaces(["kube-system"])
    proc = celkeeper(*args, "--webhook-name", "nope")
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith("no ValidatingWebhookConfiguration with a webhook named nope")
