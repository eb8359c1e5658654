"""Request families: AdmissionReviews of every operation (DELETE with oldObject, UPDATE, CONNECT,
subresources), and matching / enforcement actions over objects with and without namespaces."""

from __future__ import annotations

import copy
from typing import Any

from tests.e2e.gator.corpus import objects as o
from tests.e2e.gator.corpus.expressions import expression_family
from tests.e2e.gator.corpus.model import (
    CorpusCase,
    CorpusTest,
    Family,
    Names,
    constraint,
    kind_name,
    template,
)

REQUEST_EXPRESSIONS = [
    "object != null",
    "oldObject != null",
    "object == null",
    "variables.anyObject.metadata.name == 'web-7d9f8b6c5-x2x4k'",
    "variables.anyObject.kind == 'Pod'",
    "request.operation == 'CREATE'",
    "request.operation == 'DELETE' || has(object.metadata.labels)",
    "request.subResource == ''",
    "has(request.subResource)",
    "request.userInfo.username.startsWith('system:')",
    "'system:masters' in request.userInfo.groups",
    "request.dryRun == true",
    "request.options == null",
    "request.kind.kind == 'Pod'",
    "request.kind.group == ''",
    "request.resource.resource == 'pods'",
    "request.requestKind.kind == 'Pod'",
    "request.name == variables.anyObject.metadata.name",
    "request.namespace == 'shop'",
    "object.metadata.labels == oldObject.metadata.labels",
    "has(object.metadata.labels)",
    "object.metadata.?labels.orValue({}).size() >= 0",
    "oldObject.metadata.name == object.metadata.name",
    "has(oldObject.metadata)",
    "object.kind == 'Pod'",
    "namespaceObject == null",
    "request.uid != ''",
]


def reviews() -> dict[str, dict[str, Any]]:
    pod = o.realistic_pods()["labelled-pod"]
    relabelled = copy.deepcopy(pod)
    relabelled["metadata"]["labels"]["tier"] = "backend"
    scale = {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"replicas": 3},
    }
    exec_options = {"apiVersion": "v1", "kind": "PodExecOptions", "command": ["sh"], "container": "web"}
    return {
        "plain-pod": pod,
        "create": o.review("CREATE", pod),
        "create-dry-run": o.review("CREATE", pod, dry_run=True, user="system:serviceaccount:ci:deployer"),
        "create-masters": o.review("CREATE", pod, groups=("system:masters",)),
        "update": o.review("UPDATE", relabelled, pod, options={"kind": "UpdateOptions"}),
        "update-same": o.review("UPDATE", pod, pod),
        "delete": o.review("DELETE", None, pod),
        "delete-with-options": o.review("DELETE", None, pod, options={"kind": "DeleteOptions"}),
        "connect-exec": o.review(
            "CONNECT",
            exec_options,
            kind=("", "v1", "PodExecOptions"),
            resource=("", "v1", "pods"),
            sub_resource="exec",
            name="web-7d9f8b6c5-x2x4k",
            namespace_name="shop",
        ),
        "status-update": o.review("UPDATE", relabelled, pod, sub_resource="status"),
        "scale-update": o.review(
            "UPDATE",
            scale,
            scale,
            kind=("autoscaling", "v1", "Scale"),
            resource=("apps", "v1", "deployments"),
            sub_resource="scale",
        ),
        "v1beta1-create": o.review("CREATE", pod, version="v1beta1"),
        "no-operation": o.review(None, pod),
        "old-object-only": o.review(None, None, pod),
    }


def operations_family() -> Family:
    return expression_family(
        "operations",
        "KReq",
        REQUEST_EXPRESSIONS,
        reviews(),
        failure_policies=(None, "Ignore"),
        doc="AdmissionReviews: CREATE, UPDATE, DELETE with oldObject, CONNECT, subresources, dryRun",
    )


def template_operations_family() -> Family:
    """Templates limited to some operations (spec.targets[0].operations), on every review."""
    names = Names()
    tests = []
    for i, ops in enumerate((["CREATE"], ["UPDATE", "DELETE"], ["CONNECT"], ["*"], [])):
        kind = kind_name("KOps", i)
        tmpl = template(kind, [{"expression": "false", "message": f"ops {ops}"}], operations=ops)
        tests.append(
            CorpusTest(
                name=names(f"{kind}-{'-'.join(ops) or 'none'}"),
                template=tmpl,
                constraint=constraint(kind, "c"),
                cases=tuple(CorpusCase(n, r) for n, r in reviews().items()),
            )
        )
    return Family("template-operations", tuple(tests), "templates restricted to operations")


# -- matching and enforcement actions ----------------------------------------------------------------
MATCHES: dict[str, dict[str, Any]] = {
    "no-match": {},
    "pods": {"match": {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]}},
    "any-group-pods": {"match": {"kinds": [{"kinds": ["Pod"]}]}},
    "star-kinds": {"match": {"kinds": [{"apiGroups": ["*"], "kinds": ["*"]}]}},
    "apps-only": {"match": {"kinds": [{"apiGroups": ["apps"], "kinds": ["Deployment"]}]}},
    "empty-kinds-entry": {"match": {"kinds": [{}]}},
    "scope-cluster": {"match": {"scope": "Cluster"}},
    "scope-namespaced": {"match": {"scope": "Namespaced"}},
    "scope-star": {"match": {"scope": "*"}},
    "namespaces-shop": {"match": {"namespaces": ["shop"]}},
    "namespaces-prefix": {"match": {"namespaces": ["kube-*"]}},
    "namespaces-suffix": {"match": {"namespaces": ["*-system"]}},
    "excluded-shop": {"match": {"excludedNamespaces": ["shop"]}},
    "excluded-kube": {"match": {"excludedNamespaces": ["kube-*"]}},
    "label-app-web": {"match": {"labelSelector": {"matchLabels": {"app": "web"}}}},
    "label-expressions": {
        "match": {
            "labelSelector": {
                "matchExpressions": [
                    {"key": "app", "operator": "In", "values": ["web", "debug"]},
                    {"key": "tier", "operator": "NotIn", "values": ["backend"]},
                ]
            }
        }
    },
    "label-exists": {
        "match": {"labelSelector": {"matchExpressions": [{"key": "owner", "operator": "Exists"}]}}
    },
    "label-not-exists": {
        "match": {"labelSelector": {"matchExpressions": [{"key": "owner", "operator": "DoesNotExist"}]}}
    },
    "namespace-selector": {"match": {"namespaceSelector": {"matchLabels": {"env": "prod"}}}},
    "namespace-selector-empty": {"match": {"namespaceSelector": {}}},
    "name-exact": {"match": {"name": "web-1"}},
    "name-prefix": {"match": {"name": "web-*"}},
    "name-generate": {"match": {"name": "gen-*"}},
    "source-original": {"match": {"source": "Original"}},
    "source-generated": {"match": {"source": "Generated"}},
    "source-all": {"match": {"source": "All"}},
    "warn": {"action": "warn"},
    "dryrun": {"action": "dryrun"},
    "deny": {"action": "deny"},
    "scoped-gator-warn": {
        "action": "scoped",
        "scoped": [{"action": "warn", "enforcementPoints": [{"name": "gator.gatekeeper.sh"}]}],
    },
    "scoped-webhook-only": {
        "action": "scoped",
        "scoped": [{"action": "deny", "enforcementPoints": [{"name": "validation.gatekeeper.sh"}]}],
    },
    "scoped-star-deny-warn": {
        "action": "scoped",
        "scoped": [
            {"action": "deny", "enforcementPoints": [{"name": "*"}]},
            {"action": "warn", "enforcementPoints": [{"name": "gator.gatekeeper.sh"}]},
        ],
    },
    "scoped-audit-and-gator": {
        "action": "scoped",
        "scoped": [
            {
                "action": "dryrun",
                "enforcementPoints": [{"name": "audit.gatekeeper.sh"}, {"name": "gator.gatekeeper.sh"}],
            }
        ],
    },
}


def matching_objects() -> dict[str, dict[str, Any]]:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web"}},
        "spec": {"replicas": 2},
    }
    generated = o.pod("ignored", labels={"app": "web"})
    del generated["metadata"]["name"]
    generated["metadata"]["generateName"] = "gen-"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "web-1", "labels": {"app": "web"}},
        "rules": [],
    }
    return {
        "pod-shop": o.pod("web-1", "shop", labels={"app": "web", "owner": "me"}),
        "pod-kube-system": o.pod("web-2", "kube-system", labels={"app": "debug", "tier": "backend"}),
        "pod-no-namespace": o.pod("web-3", None, labels={"app": "web"}),
        "pod-generate-name": generated,
        "namespace-shop": o.namespace("shop", {"env": "prod", "app": "web"}),
        "namespace-kube-system": o.namespace("kube-system"),
        "cluster-role": role,
        "deployment": deployment,
    }


def matching_family() -> Family:
    names = Names()
    kind = kind_name("KMatch", 0)
    tmpl = template(
        kind, [{"expression": "false", "messageExpression": "'matched ' + variables.anyObject.kind"}]
    )
    objs = matching_objects()
    inventory = (o.namespace("shop", {"env": "prod"}), o.namespace("kube-system", {"env": "system"}))
    tests = []
    for cname, kwargs in MATCHES.items():
        cases = []
        for oname, obj in objs.items():
            cases.append(CorpusCase(oname, obj))
            cases.append(CorpusCase(f"{oname}-with-inventory", obj, inventory))
        tests.append(
            CorpusTest(
                name=names(cname),
                template=tmpl,
                constraint=constraint(kind, cname, **kwargs),
                cases=tuple(cases),
            )
        )
    # AdmissionReviews whose request namespace differs from the object's
    pod = o.pod("web-1", "shop", labels={"app": "web"})
    for cname in ("namespaces-shop", "excluded-shop", "namespace-selector", "scope-namespaced"):
        cases = [
            CorpusCase("request-namespace-other", o.review("CREATE", pod, namespace_name="other")),
            CorpusCase(
                "request-namespace-other-inv", o.review("CREATE", pod, namespace_name="other"), inventory
            ),
            CorpusCase("request-namespace-empty", o.review("CREATE", pod, namespace_name="")),
            CorpusCase("request-namespace-shop-inv", o.review("CREATE", pod), inventory),
            CorpusCase("delete-shop-inv", o.review("DELETE", None, pod), inventory),
        ]
        tests.append(
            CorpusTest(
                name=names(f"review-{cname}"),
                template=tmpl,
                constraint=constraint(kind, f"r-{cname}", **MATCHES[cname]),
                cases=tuple(cases),
            )
        )
    # namespaceObject: gator never binds it (only Gatekeeper's webhook and audit do), inventory or not
    kind = kind_name("KMatch", 1)
    ns_tmpl = template(
        kind,
        [
            {
                "expression": "namespaceObject == null",
                "messageExpression": "'namespaceObject: ' + string(namespaceObject.metadata.labels)",
            }
        ],
    )
    cases = [CorpusCase(f"{n}-inv", obj, inventory) for n, obj in objs.items()]
    cases += [CorpusCase("review-inv", o.review("CREATE", pod), inventory)]
    tests.append(
        CorpusTest(
            name=names("namespace-object"),
            template=ns_tmpl,
            constraint=constraint(kind, "namespace-object"),
            cases=tuple(cases),
        )
    )
    return Family("matching", tuple(tests), "spec.match criteria and enforcement actions, with inventory")


def invalid_constraints_family() -> Family:
    """`invalid: true` tests: constraints Gatekeeper rejects (and some it accepts)."""
    names = Names()
    schema = {
        "type": "object",
        "properties": {
            "limit": {"type": "integer"},
            "labels": {"type": "array", "items": {"type": "string"}},
        },
    }
    kind = kind_name("KInv", 0)
    tmpl = template(kind, [{"expression": "true"}], schema=schema)
    variants: dict[str, dict[str, Any]] = {
        "wrong-type": {"parameters": {"limit": "five"}},
        "unknown-parameter": {"parameters": {"other": 1}},
        "list-of-wrong-items": {"parameters": {"labels": [1, 2]}},
        "valid": {"parameters": {"limit": 3}},
        "bad-action": {"action": "block"},
        "bad-label-selector": {
            "match": {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}}
        },
        "bad-namespace-glob": {"match": {"namespaces": ["a*b"]}},
        "scoped-without-actions": {"action": "scoped"},
        "null-parameters": {"parameters": None},
    }
    tests = []
    for cname, kwargs in variants.items():
        if cname == "null-parameters":
            c = constraint(kind, cname, no_parameters_key=False)
        else:
            c = constraint(kind, cname, **kwargs)
        tests.append(CorpusTest(names(f"invalid-{cname}"), tmpl, c, cases=(), invalid=True))
    return Family("invalid-constraints", tuple(tests), "constraints expected to be invalid")
