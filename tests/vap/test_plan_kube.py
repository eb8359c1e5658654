"""Generated policies on a real kube-apiserver (1.37, ValidatingAdmissionPolicy GA), no webhook registered.

- the API server accepts exactly the policies and bindings celkeeper says it will, and refuses the others
  at the field celkeeper names;
- it denies a violating object through the policy with celkeeper's message, warns for warn constraints,
  records dryrun constraints in the audit log, and follows a constraint's parameters when they change;
- on every example suite case a create can replay, it decides as celkeeper's webhook does (run as the
  cluster's webhook in a first pass), except where celkeeper said it would not.
"""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from celkeeper.cel import get_engine
from celkeeper.documents import Document
from celkeeper.model import EnforcementPoint
from celkeeper.policy import TemplateCompiler, build_policy_set
from celkeeper.review import decide, parse_admission_review
from celkeeper.templates import parse_template
from celkeeper.vap import binding, validating_admission_policy
from celkeeper.vap.plan import VapOptions, VapPlan, plan_vap
from tests.support import admission as e2e
from tests.support.apiserver import ControlPlane
from tests.support.binaries import KubeBinaries
from tests.support.policydocs import admission_review, constraint_data, template_data
from tests.support.serve import ServeProcess
from tests.vap import cases
from tests.vap.kube import (
    DryRunClient,
    Outcome,
    SuiteCase,
    apply,
    audit_events,
    dry_run_create,
    example_cases,
    install_constraint_crds,
    namespaces_of,
    start_cluster,
    wait_until,
)

pytestmark = pytest.mark.kube

NAMESPACE = "vap-e2e"
ALWAYS = VapOptions(default_generate_vap=True)


class Env:
    """The control plane with every example's and the e2e template's constraint CRDs, their constraints, the
    suites' namespaces, and (once `policies_on()` ran) the generated policies and bindings."""

    def __init__(self, cluster: ControlPlane, workdir: Path) -> None:
        self.cluster = cluster
        self.client = DryRunClient(cluster)
        self.workdir = workdir
        self.engine = get_engine()
        self.documents = cases.example_templates() + cases.example_constraints()
        self.documents += [Document.from_object(e2e.TEMPLATE)]
        self.documents += [Document.from_object(e2e.constraint(a, label)) for a, label in e2e.ACTIONS.items()]
        # the webhook serves examples/ whole: its ExpansionTemplates are planned with (warned about), not
        # applied (the cluster has no ExpansionTemplate CRD here)
        expansions = cases.example_expansions()
        self.policies = build_policy_set(self.documents + expansions, TemplateCompiler(self.engine))
        assert not self.policies.errors, self.policies.errors
        self.plan: VapPlan = plan_vap(self.policies, ALWAYS)
        self.bindings = {
            c.binding["metadata"]["name"]: c.name for c in self.plan.constraints if c.binding is not None
        }
        self.cases, self.skipped = example_cases()
        self.on = False
        self.webhook: dict[str, Outcome] | None = None

    def setup(self) -> None:
        templates = [d.data for d in self.documents if d.kind == "ConstraintTemplate"]
        install_constraint_crds(self.cluster, templates)
        apply(self.cluster, [d.data for d in self.documents if d.kind != "ConstraintTemplate"])
        namespaces = namespaces_of(self.cases)
        namespaces[NAMESPACE] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        apply(self.cluster, namespaces.values())

    def policies_on(self) -> None:
        """Apply every generated policy and binding; return once the API server enforces all of them."""
        if self.on:
            return
        if self.webhook is None:  # the webhook's answers first, while no policy is there
            self.webhook = _webhook_outcomes(self)
        apply(self.cluster, self.plan.objects())
        probe = e2e.labelled("ConfigMap", "vap-probe", {e2e.ACTIONS["deny"]: "1"}, NAMESPACE)

        def denied_by_policy() -> bool:
            outcome = self.create(probe)
            return not outcome.allowed and outcome.denials == (
                ("e2e-deny", "ConfigMap vap-probe must not have the label deny-me"),
            )

        wait_until(self.cluster, "the API server to enforce the generated policies", denied_by_policy)
        # each binding reaches the API server's policy plugin on a watch event of its own: the deny binding
        # in force does not mean the warn and dryrun ones are
        warn_probe = e2e.labelled("ConfigMap", "vap-probe", {e2e.ACTIONS["warn"]: "1"}, NAMESPACE)
        wait_until(
            self.cluster,
            "the generated warn binding to take effect",
            lambda: bool(self.create(warn_probe).warnings),
        )

        def dryrun_recorded() -> bool:
            name = f"vap-probe-{secrets.token_hex(3)}"
            self.create(e2e.labelled("ConfigMap", name, {e2e.ACTIONS["dryrun"]: "1"}, NAMESPACE))
            try:
                wait_until(
                    self.cluster, "the probe's audit event", lambda: _audit_failure(self.cluster, name), 2
                )
            except TimeoutError:
                return False
            return True

        wait_until(self.cluster, "the generated dryrun binding to take effect", dryrun_recorded)
        # every constraint kind resolved (one reset of the discovery cache covers them all): no case fails
        # with a configuration error
        wait_until(
            self.cluster,
            "every paramKind to resolve",
            lambda: all("paramKind" not in self.create(c.object).error for c in self.cases),
        )
        self.on = True

    def create(self, obj: dict[str, Any]) -> Outcome:
        return dry_run_create(self.client, obj, self.bindings)

    def celkeeper_decision(self, obj: dict[str, Any]) -> Any:
        request = parse_admission_review(admission_review(obj))
        return decide(request, self.policies, lambda _: None, EnforcementPoint.WEBHOOK)


@pytest.fixture(scope="module")
def env(kube_binaries: KubeBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    workdir = tmp_path_factory.mktemp("vap-kube")
    cluster = start_cluster(kube_binaries, workdir / "cluster")
    try:
        found = Env(cluster, workdir)
        found.setup()
        yield found
    finally:
        cluster.stop()


# --- what the API server takes -----------------------------------------------------------------------


def _dry_run(cluster: ControlPlane, obj: dict[str, Any]) -> tuple[bool, str]:
    proc = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=obj, check=False)
    return proc.returncode == 0, proc.stderr


def test_the_api_server_takes_every_generated_object(env: Env) -> None:
    """Every example's policy and binding passes the API server's validation (server-side dry run)."""
    objects = env.plan.objects()
    assert len(objects) >= 30
    for obj in objects:
        status, message, _ = env.client.create(obj)
        assert status < 300, f"{obj['kind']} {obj['metadata']['name']}: {status} {message}"


def test_the_cli_s_yaml_goes_through_kubectl(env: Env) -> None:
    """`celkeeper vap examples/ | kubectl create --dry-run=server -f -`: kubectl reads the YAML (tabs and
    all) and the API server takes every object."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "celkeeper", "vap", str(cases.EXAMPLES)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1 and proc.stdout  # replica-limits is refused, the rest is printed
    created = env.cluster.kubectl("create", "--dry-run=server", "-f", "-", input=proc.stdout)
    examples = [o for o in env.plan.objects() if "e2eforbiddenlabel" not in o["metadata"]["name"]]
    assert created.stdout.count("(server dry run)") == len(examples) == 37


@pytest.mark.parametrize(("options", "path", "words"), cases.REFUSED_TEMPLATES)
def test_the_api_server_refuses_what_celkeeper_refuses(
    env: Env, options: dict[str, Any], path: str, words: str
) -> None:
    """The policies celkeeper will not make are refused by the API server, at the field celkeeper names."""
    options = copy.deepcopy(options)
    validations = options.pop("validations", [{"expression": "true", "message": "m"}])
    data = template_data("K8sRefused", validations, api_version="templates.celkeeper.io/v1", **options)
    spec, errors = parse_template(Document.from_object(data))
    assert spec is not None, errors
    policies = build_policy_set([Document.from_object(data)], TemplateCompiler(env.engine))
    (template,) = plan_vap(policies, ALWAYS).templates
    assert template.policy is None and template.errors
    forced = validating_admission_policy(spec).object  # made anyway: what would the API server say?
    accepted, stderr = _dry_run(env.cluster, forced)
    assert not accepted, f"the API server took a policy celkeeper refuses ({words})"
    item = path.partition("]")[0] + "]"  # validations[0] or matchCondition[0]: the same list in the policy
    item = item.replace("matchCondition[", "matchConditions[")  # singular in the source, plural in VAP
    assert f"spec.{item}" in stderr, stderr


def test_the_api_server_refuses_the_bindings_celkeeper_refuses(env: Env) -> None:
    twice = [
        {"action": "deny", "enforcementPoints": [{"name": "vap.k8s.io"}]},
        {"action": "deny", "enforcementPoints": [{"name": "*"}]},
    ]
    deny_and_warn = [
        {"action": "deny", "enforcementPoints": [{"name": "vap.k8s.io"}]},
        {"action": "warn", "enforcementPoints": [{"name": "vap.k8s.io"}]},
    ]
    for scoped, api_words in (
        (twice, "Duplicate value"),
        (deny_and_warn, "must not contain both Deny and Warn"),
    ):
        constraint = constraint_data(
            e2e.TEMPLATE_KIND,
            "refused",
            action="scoped",
            scoped=scoped,
            api_version="constraints.celkeeper.io/v1beta1",
        )
        documents = [Document.from_object(e2e.TEMPLATE), Document.from_object(constraint)]
        plan = plan_vap(build_policy_set(documents, TemplateCompiler(env.engine)), ALWAYS)
        (planned,) = plan.constraints
        assert planned.binding is None and planned.errors
        forced = binding(constraint, [e["action"] for e in scoped])
        accepted, stderr = _dry_run(env.cluster, forced)
        assert not accepted and api_words in stderr, stderr


def test_a_template_whose_match_condition_reads_variables_is_refused_by_the_api_server(env: Env) -> None:
    """replica-limits (an example) cannot be a policy: celkeeper says why, and the API server agrees."""
    (template,) = [t for t in env.plan.templates if t.name == "ckreplicalimits"]
    assert template.policy is None
    assert any("reads variables" in e.message for e in template.errors)
    data = next(d.data for d in env.documents if d.name == "ckreplicalimits")
    spec, _ = parse_template(Document.from_object(data))
    assert spec is not None
    accepted, stderr = _dry_run(env.cluster, validating_admission_policy(spec).object)
    assert not accepted and "spec.matchConditions[0].expression" in stderr and "variables" in stderr, stderr


# --- what the API server decides ----------------------------------------------------------------------


def test_a_violating_object_is_denied_by_the_policy_with_celkeeper_s_message(env: Env) -> None:
    env.policies_on()
    obj = e2e.labelled("ConfigMap", "bad", {e2e.ACTIONS["deny"]: "yes"}, NAMESPACE)
    outcome = env.create(obj)
    decision = env.celkeeper_decision(obj)
    assert not decision.allowed
    assert not outcome.allowed
    assert outcome.denials == (("e2e-deny", "ConfigMap bad must not have the label deny-me"),)
    assert [(r.constraint_name, r.message) for r in decision.denies] == list(outcome.denials)
    ok = env.create(e2e.labelled("ConfigMap", "good", {"team": "a"}, NAMESPACE))
    assert ok.allowed and not ok.warnings


def test_a_warn_constraint_warns_through_the_policy(env: Env) -> None:
    env.policies_on()
    obj = e2e.labelled("ConfigMap", "loud", {e2e.ACTIONS["warn"]: "yes"}, NAMESPACE)
    outcome = env.create(obj)
    assert outcome.allowed
    assert outcome.warnings == {("e2e-warn", "ConfigMap loud must not have the label warn-me")}
    decision = env.celkeeper_decision(obj)
    assert {(r.constraint_name, r.message) for r in decision.warnings} == outcome.warnings


def _audit_failure(cluster: ControlPlane, name: str) -> list[dict[str, Any]]:
    """The validation failures the API server's audit log records for the creation of `name`."""
    for event in audit_events(cluster):
        if (event.get("objectRef") or {}).get("name") == name and event.get("stage") == "ResponseComplete":
            value = (event.get("annotations") or {}).get(
                "validation.policy.admission.k8s.io/validation_failure"
            )
            if value:
                return list(json.loads(value))
    return []


def test_a_dryrun_constraint_is_recorded_in_the_audit_log(env: Env) -> None:
    env.policies_on()
    name = f"quiet-{secrets.token_hex(3)}"
    obj = e2e.labelled("ConfigMap", name, {e2e.ACTIONS["dryrun"]: "yes"}, NAMESPACE)
    outcome = env.create(obj)
    assert outcome.allowed and not outcome.warnings

    def failure() -> list[dict[str, Any]]:
        return _audit_failure(env.cluster, name)

    wait_until(env.cluster, "the audit event of the dryrun violation", failure, timeout=20)
    assert failure() == [
        {
            "message": f"ConfigMap {name} must not have the label dryrun-me",
            "policy": "gatekeeper-e2eforbiddenlabel",
            "binding": "gatekeeper-e2eforbiddenlabel-e2e-dryrun",
            "expressionIndex": 0,
            "validationActions": ["Audit"],
        }
    ]


def test_changed_parameters_take_effect_through_the_binding(env: Env) -> None:
    env.policies_on()
    constraint = e2e.constraint("deny", "deny-me")
    constraint["metadata"]["name"] = "e2e-params"
    apply(env.cluster, [constraint])
    kind = e2e.TEMPLATE_KIND
    documents = [Document.from_object(e2e.TEMPLATE), Document.from_object(constraint)]
    (planned,) = plan_vap(build_policy_set(documents, TemplateCompiler(env.engine)), ALWAYS).constraints
    assert planned.binding is not None
    apply(env.cluster, [planned.binding])
    bindings = {**env.bindings, planned.binding["metadata"]["name"]: "e2e-params"}
    obj = e2e.labelled("ConfigMap", "p", {"other-label": "1"}, NAMESPACE)

    def params_denials() -> set[tuple[str, str]]:
        return {d for d in dry_run_create(env.client, obj, bindings).denials if d[0] == "e2e-params"}

    assert params_denials() == set()
    constraint["spec"]["parameters"]["label"] = "other-label"
    apply(env.cluster, [constraint])
    wait_until(env.cluster, "the new parameters to be enforced", params_denials, timeout=30)
    assert params_denials() == {("e2e-params", "ConfigMap p must not have the label other-label")}
    env.cluster.kubectl("delete", f"{kind.lower()}.constraints.celkeeper.io", "e2e-params")
    env.cluster.kubectl("delete", "validatingadmissionpolicybinding", planned.binding["metadata"]["name"])


# --- the differential test ------------------------------------------------------------------------------


def _webhook_outcomes(env: Env) -> dict[str, Outcome]:
    """Every case through celkeeper's real webhook (`celkeeper serve` on examples/, registered for every
    resource), before any policy is applied."""
    namespaces = json.loads(env.cluster.kubectl("get", "namespaces", "-o", "json").stdout)["items"]
    namespaces_file = env.workdir / "namespaces.yaml"
    namespaces_file.write_text("\n---\n".join(json.dumps(n) for n in namespaces), encoding="utf-8")
    server = ServeProcess(
        env.workdir / "serve", cases.EXAMPLES, workers=1, args=["--namespaces", str(namespaces_file)]
    )
    server.start()
    name = "celkeeper-vap-differential"
    try:
        config = e2e.webhook_configuration(
            name, f"https://127.0.0.1:{server.port}/v1/admit", server.certs.ca_cert.read_bytes(), "unused"
        )
        hook = config["webhooks"][0]
        del hook["namespaceSelector"]
        hook["rules"] = [
            {
                "apiGroups": ["*"],
                "apiVersions": ["*"],
                "operations": ["CREATE"],
                "resources": ["*"],
                "scope": "*",
            }
        ]
        e2e.register_webhook(env.cluster, config)
        denied = next(c for c in env.cases if not env.celkeeper_decision(c.object).allowed)

        def webhook_answers() -> bool:
            return any(d[0] for d in env.create(denied.object).denials)

        wait_until(env.cluster, "the webhook to be called", webhook_answers, timeout=30)
        return {c.id: env.create(c.object) for c in env.cases}
    finally:
        e2e.unregister_webhook(env.cluster, name)
        server.stop()


def _explained(env: Env, case: SuiteCase, webhook: Outcome, policy: Outcome) -> bool:
    """A difference celkeeper predicted: a finding on a constraint involved (or on its template)."""
    involved = {c for c, _ in (*webhook.denials, *policy.denials, *webhook.warnings, *policy.warnings)}
    for constraint in env.plan.constraints:
        template = next(t for t in env.plan.templates if t.kind == constraint.kind)
        if constraint.name in involved and (constraint.warnings or constraint.errors or template.errors):
            return True
    return False


def test_the_api_server_decides_every_example_case_as_celkeeper_s_webhook(env: Env) -> None:
    env.policies_on()
    webhook = env.webhook
    assert webhook is not None
    agreed, explained, invalid, implied = [], [], [], []
    for case in env.cases:
        ours, theirs = webhook[case.id], env.create(case.object)
        if ours.error or theirs.error:
            # the API server's own validation refuses the object before admission: nothing to compare
            assert ours.error == theirs.error, case.id
            assert " is invalid" in ours.error or "cannot be handled" in ours.error, ours.error
            invalid.append(case.id)
            continue
        same = (
            ours.allowed == theirs.allowed
            and ours.warnings == theirs.warnings
            and (
                ours.allowed or theirs.denials[0] in ours.denials  # the policy reports its first denial
            )
        )
        if same:
            agreed.append(case.id)
            continue
        assert _explained(env, case, ours, theirs), f"{case.id}: webhook {ours}, policy {theirs}"
        explained.append(case.id)
        missed = {*ours.denials, *ours.warnings} - {*theirs.denials, *theirs.warnings}
        if missed and all(message.startswith("[Implied by ") for _, message in missed):
            implied.append(case.id)  # the webhook checked the workload as its Pods; the policy cannot
    print(
        f"\n{len(agreed)} cases agree, {len(explained)} differ as predicted ({', '.join(explained)}), "
        f"{len(invalid)} objects the API server finds invalid ({', '.join(invalid)}), "
        f"{len(env.skipped)} UPDATE/DELETE reviews not replayed"
    )
    assert len(agreed) >= 40
    assert len(invalid) < len(env.cases) // 5
    # replica-limits cannot be a policy; a Namespace excluded by its name is not excluded by the policy;
    # workloads (Deployments, a DaemonSet, a CronJob) are checked by the webhook as the Pods
    # examples/workload-expansion's ExpansionTemplates generate, which the policy never sees
    assert {c.split("/")[0] for c in explained} == {
        "replica-limits",
        "required-labels",
        "immutable-labels",
        "workload-expansion",
    }
    assert {c.split("/")[0] for c in implied} >= {"immutable-labels", "workload-expansion"}
    assert {c.split("/")[0] for c in explained if c not in implied} <= {"replica-limits", "required-labels"}
