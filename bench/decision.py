"""Decision cost: one Pod AdmissionReview against 20 matching constraints, and against 200 of which 20 match.

Prints the median microseconds per decision (AdmissionReview validation + decide: matching in
Python, then one engine call for every matching constraint) for each case and the ratio, per
engine, and what building the policy set cost (compiling the templates, binding the constraints).
Targets (cel-go): <= 150 us with 20 matching constraints on a ~5 KB Pod; the 200-constraint case
<= 1.1x the 20-constraint case (constraints of other kinds must cost nothing). Also: the same decision
explained (review.explain, rendered as text), what --log-denies=explain adds to a denial. The constraints'
parameters differ (mostly).

    .venv/bin/python bench/decision.py [--engine cel-go|cel-python|all] [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from celkeeper.cel import ENGINES, get_engine
from celkeeper.documents import Document
from celkeeper.model import EnforcementPoint
from celkeeper.policy import PolicySet, TemplateCompiler, build_policy_set
from celkeeper.review import decide, parse_admission_review
from celkeeper.review.explain import explain
from celkeeper.review.explain_text import render_text

# five typical templates (four constraints each match Pods)
TEMPLATES: dict[str, dict[str, Any]] = {
    "K8sRequiredLabels": {
        "schema": {
            "type": "object",
            "properties": {"labels": {"type": "array", "items": {"type": "string"}}},
        },
        "variables": [
            {"name": "labels", "expression": "has(object.metadata.labels) ? object.metadata.labels : {}"}
        ],
        "validations": [
            {
                "expression": "variables.params.labels.all(l, l in variables.labels)",
                "messageExpression": "'missing labels: ' + variables.params.labels.filter(l, !(l in "
                "variables.labels))"
                ".join(', ')",
            }
        ],
        "parameters": lambda i: {"labels": ["app", f"team{i}" if i % 2 else "app"]},
    },
    "K8sAllowedRepos": {
        "schema": {"type": "object", "properties": {"repos": {"type": "array", "items": {"type": "string"}}}},
        "validations": [
            {
                "expression": "object.spec.containers.all(c, variables.params.repos.exists(r, "
                "c.image.startsWith(r)))",
                "message": "container image from a registry that is not allowed",
            }
        ],
        "parameters": lambda i: {"repos": ["registry.example.com/", f"mirror{i}.example.com/"]},
    },
    "K8sNoLatest": {
        "schema": {"type": "object", "properties": {"tag": {"type": "string"}}},
        "validations": [
            {
                "expression": "object.spec.containers.all(c, c.image.contains(':') && "
                "!c.image.endsWith(':' + "
                "variables.params.tag))",
                "messageExpression": "'images must not use the ' + variables.params.tag + ' tag'",
            }
        ],
        "parameters": lambda i: {"tag": "latest"},
    },
    "K8sNoPrivileged": {
        "schema": {
            "type": "object",
            "properties": {"exempt": {"type": "array", "items": {"type": "string"}}},
        },
        "variables": [
            {
                "name": "containers",
                "expression": "object.spec.containers + (has(object.spec.initContainers) ? "
                "object.spec.initContainers : [])",
            }
        ],
        "validations": [
            {
                "expression": "!variables.containers.exists(c, has(c.securityContext) && "
                "has(c.securityContext.privileged) && c.securityContext.privileged && "
                "!(c.name in variables.params.exempt))",
                "message": "privileged containers are not allowed",
            }
        ],
        "parameters": lambda i: {"exempt": [f"debug{i}"]},
    },
    "K8sContainerLimits": {
        "schema": {"type": "object", "properties": {"cpu": {"type": "string"}, "memory": {"type": "string"}}},
        "validations": [
            {
                "expression": "object.spec.containers.all(c, has(c.resources) && has(c.resources.limits) && "
                "'cpu' in c.resources.limits && 'memory' in c.resources.limits)",
                "message": "containers need cpu and memory limits",
            },
            {
                "expression": "object.spec.containers.all(c, !has(c.resources.limits) || !('memory' in "
                "c.resources.limits) || quantity(c.resources.limits.memory).compareTo("
                "quantity(variables.params.memory)) <= 0)",
                "messageExpression": "'memory limit above ' + variables.params.memory",
            },
        ],
        "parameters": lambda i: {"cpu": "2", "memory": f"{i + 1}Gi"},
    },
}
OTHER_KINDS = [
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("", "Service"),
    ("", "ConfigMap"),
    ("networking.k8s.io", "Ingress"),
    ("batch", "Job"),
    ("", "Secret"),
    ("rbac.authorization.k8s.io", "Role"),
    ("", "ServiceAccount"),
]


def template(kind: str, spec: dict[str, Any]) -> Document:
    source: dict[str, Any] = {"validations": spec["validations"]}
    if "variables" in spec:
        source["variables"] = spec["variables"]
    return Document.from_object(
        {
            "apiVersion": "templates.gatekeeper.sh/v1",
            "kind": "ConstraintTemplate",
            "metadata": {"name": kind.lower()},
            "spec": {
                "crd": {"spec": {"names": {"kind": kind}, "validation": {"openAPIV3Schema": spec["schema"]}}},
                "targets": [
                    {
                        "target": "admission.k8s.gatekeeper.sh",
                        "code": [{"engine": "K8sNativeValidation", "source": source}],
                    }
                ],
            },
        }
    )


def constraint(kind: str, name: str, group: str, target_kind: str, parameters: Any) -> Document:
    return Document.from_object(
        {
            "apiVersion": "constraints.gatekeeper.sh/v1beta1",
            "kind": kind,
            "metadata": {"name": name},
            "spec": {
                "match": {
                    "kinds": [{"apiGroups": [group], "kinds": [target_kind]}],
                    "excludedNamespaces": ["kube-system"],
                },
                "parameters": parameters,
            },
        }
    )


def policy_set(compiler: TemplateCompiler, total: int) -> PolicySet:
    documents = [template(kind, spec) for kind, spec in TEMPLATES.items()]
    kinds = list(TEMPLATES)
    for i in range(total):
        kind = kinds[i % len(kinds)]
        parameters = TEMPLATES[kind]["parameters"](i)
        if i < 20:
            documents.append(constraint(kind, f"pods-{i}", "", "Pod", parameters))
        else:
            group, other = OTHER_KINDS[i % len(OTHER_KINDS)]
            documents.append(constraint(kind, f"other-{i}", group, other, parameters))
    policies = build_policy_set(documents, compiler)
    if policies.errors:
        raise SystemExit("\n".join(str(e) for e in policies.errors))
    return policies


def review() -> dict[str, Any]:
    container = {
        "name": "app",
        "image": "registry.example.com/team/app:1.4.2",
        "resources": {
            "limits": {"cpu": "500m", "memory": "512Mi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
        "securityContext": {"privileged": False, "runAsNonRoot": True},
        "ports": [{"containerPort": 8080}],
        "env": [{"name": f"VAR{i}", "value": str(i)} for i in range(10)],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1",
            "namespace": "prod",
            "labels": {"app": "web", "team1": "x"},
            "annotations": {"note": "x" * 100},
        },
        "spec": {"containers": [container, {**container, "name": "sidecar"}], "serviceAccountName": "web"},
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "prod",
            "name": "web-1",
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


NAMESPACES = {
    "prod": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"env": "prod"}}}
}


def measure(policies: PolicySet, rounds: int, explained: bool = False) -> tuple[float, int]:
    """Median microseconds of one decision (explained: decided with a recorder and rendered as text, what
    --log-denies=explain adds to a denial)."""
    body = review()
    lookup = NAMESPACES.get

    def once() -> int:
        request = parse_admission_review(body)
        if explained:
            explanation = explain(request, policies, lookup, EnforcementPoint.WEBHOOK)
            render_text(explanation)
            return len(explanation.decision.results)
        return len(decide(request, policies, lookup, EnforcementPoint.WEBHOOK).results)

    results = 0
    for _ in range(max(rounds // 10, 20)):  # warm up
        once()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter_ns()
        results = once()
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="cel-go", choices=[*ENGINES, "all"])
    parser.add_argument(
        "--rounds", type=int, default=0, help="decisions to time (default: 2000, 100 for cel-python)"
    )
    args = parser.parse_args()
    engines = list(ENGINES) if args.engine == "all" else [args.engine]
    for name in engines:
        engine = get_engine(name)
        rounds = args.rounds or (2000 if name == "cel-go" else 100)
        print(f"engine {name}: {rounds} decisions per case, median")
        figures: dict[int, float] = {}
        for total in (20, 200):
            started = time.perf_counter()
            policies = policy_set(TemplateCompiler(engine), total)  # a new compiler: nothing cached
            built = time.perf_counter() - started
            assert len(policies.candidates("", "Pod")) == 20
            figures[total], results = measure(policies, rounds)
            label = f"{total} constraints, 20 matching:" if total > 20 else "20 matching constraints:"
            print(
                f"  {label:<38} {figures[total]:8.1f} us/decision ({results} results); "
                f"policies built in {built * 1e3:.0f} ms"
            )
            if total == 20:
                slow, _ = measure(policies, max(rounds // 10, 20), explained=True)
                print(
                    f"  {'the same, explained (text):':<38} {slow:8.1f} us/decision "
                    f"(x{slow / figures[20]:.1f}: what --log-denies=explain adds to a denial)"
                )
        ratio = figures[200] / figures[20]
        print(f"  ratio 200/20:{'':<25} {ratio:8.2f}  (target <= 1.1)")
        if name == "cel-go":
            print(f"  target <= 150 us at 20:{'':<15} {'met' if figures[20] <= 150 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
