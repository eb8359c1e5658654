"""An explained mutation's trace (the native library's mutation/explain.go, rendered by
review.explain_text.render_mutation): its patches, applied in the order the trace gives them, make exactly
the object Gatekeeper's own System makes (review.mutate), on the mutation differential's generated
rounds (tests/e2e/gatekeeper/cases.py, the mutators and objects proven against Gatekeeper's webhook);
mutators that did not match name criteria that really do not hold."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from celkeeper.documents import Document
from celkeeper.mutation import build_mutator_set
from celkeeper.review import admission_review_for, inventory_lookup
from celkeeper.review.explain_text import render_mutation
from celkeeper.review.mutate import mutate
from tests.e2e.gatekeeper import cases
from tests.support.native import require_celgo


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


def _apply(obj: Any, patch: list[dict[str, Any]]) -> Any:
    """RFC 6902 add, replace and remove (what gomodules.xyz/jsonpatch's CreatePatch makes)."""
    for op in patch:
        *parents, last = [_unescape(p) for p in op["path"].split("/")[1:]]
        target = obj
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            index = len(target) if last == "-" else int(last)
            if op["op"] == "add":
                target.insert(index, copy.deepcopy(op["value"]))
            elif op["op"] == "replace":
                target[index] = copy.deepcopy(op["value"])
            else:
                del target[index]
        elif op["op"] in ("add", "replace"):
            target[last] = copy.deepcopy(op["value"])
        else:
            del target[last]
    return obj


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_traced_patches_make_what_gatekeepers_system_makes(seed: int) -> None:
    require_celgo()
    namespaces = {
        name: {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels)}}
        for name, labels in cases.NAMESPACES.items()
    }
    lookup = inventory_lookup(namespaces, complete=False)
    traced = changed = unmatched = 0
    for round_ in cases.rounds(seed, count=8, creates=12, updates=0, annotated=0):
        mutators = build_mutator_set(
            [Document.from_object(m, "m.yaml", i) for i, m in enumerate(round_.mutators)]
        )
        for obj in round_.creates:
            mutation = mutate(admission_review_for(obj, operation="CREATE"), mutators, lookup, explain=True)
            if mutation.error or mutation.trace is None:
                continue
            traced += 1
            rebuilt = copy.deepcopy(obj)
            changes = sorted(
                (change["pass"], order, change["patch"])
                for order, entry in enumerate(mutation.trace["mutators"])
                for change in entry.get("changes") or ()
            )
            for _, _, patch in changes:
                _apply(rebuilt, patch)
            assert rebuilt == mutation.object, render_mutation(mutation, mutators, obj["metadata"]["name"])
            changed += bool(changes)
            assert bool(changes) == mutation.mutated
            for entry in mutation.trace["mutators"]:
                if not entry["matched"] and not entry.get("matchError") and not entry.get("conflict"):
                    unmatched += 1
                    assert entry.get("notMatched"), entry  # a mutator that did not match says why
    assert traced >= 60 and changed >= 20 and unmatched >= 50, (traced, changed, unmatched)


def test_the_text_names_the_criterion_and_its_written_value() -> None:
    require_celgo()
    docs = [
        {
            "apiVersion": "mutations.gatekeeper.sh/v1",
            "kind": "AssignMetadata",
            "metadata": {"name": "prod-only"},
            "spec": {
                "match": {"namespaceSelector": {"matchLabels": {"env": "prod"}}},
                "location": "metadata.labels.tier",
                "parameters": {"assign": {"value": "gold"}},
            },
        },
        {
            "apiVersion": "mutations.gatekeeper.sh/v1",
            "kind": "Assign",
            "metadata": {"name": "deployments-only"},
            "spec": {
                "applyTo": [{"groups": ["apps"], "versions": ["v1"], "kinds": ["Deployment"]}],
                "location": "spec.replicas",
                "parameters": {"assign": {"value": 3}},
            },
        },
        {
            "apiVersion": "mutations.gatekeeper.sh/v1",
            "kind": "AssignMetadata",
            "metadata": {"name": "owner"},
            "spec": {"location": "metadata.labels.owner", "parameters": {"assign": {"value": "team-a"}}},
        },
    ]
    mutators = build_mutator_set([Document.from_object(d, "m.yaml", i) for i, d in enumerate(docs)])
    dev = {
        "dev": {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "dev", "labels": {"env": "dev"}},
        }
    }
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "dev"}, "spec": {}}
    mutation = mutate(
        admission_review_for(pod, operation="CREATE"),
        mutators,
        inventory_lookup(dev, complete=False),
        explain=True,
    )
    text = render_mutation(mutation, mutators, "Pod dev/web")
    assert text.splitlines() == [
        "Mutation of Pod dev/web (Gatekeeper's mutation webhook): mutated: 1 change(s) in 1 pass(es)",
        '  Assign//deployments-only:1  not matched: spec.applyTo [{"groups": ["apps"], "versions": ["v1"], '
        '"kinds": ["Deployment"]}]',
        '  AssignMetadata//owner:1  pass 1: add /metadata/labels {"owner": "team-a"}',
        "  AssignMetadata//prod-only:1  not matched: spec.match.namespaceSelector "
        '{"matchLabels": {"env": "prod"}}',
    ]
