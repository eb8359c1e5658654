"""The policy documents of a snapshot (celkeeper.snapshot.documents): each text parsed once, only
policies kept."""

from __future__ import annotations

from celkeeper.snapshot import (
    SnapshotItem,
)
from celkeeper.snapshot.documents import DocumentCache
from tests.support.policyfiles import CONSTRAINT, OBJECT, TEMPLATE


def test_document_cache_parses_each_text_once_and_keeps_only_policies() -> None:
    cache = DocumentCache()
    items = (
        SnapshotItem("t.yaml", TEMPLATE),
        SnapshotItem("c.yaml", CONSTRAINT),
        SnapshotItem("o.yaml", OBJECT),
    )
    docs = cache.policy_documents(items)
    assert [d.kind for d in docs.documents] == ["ConstraintTemplate", "K8sDemo"]
    assert cache.parses == 3
    cache.policy_documents(items)
    assert cache.parses == 3
    changed = (items[0], SnapshotItem("c.yaml", CONSTRAINT.replace("demo", "demo2")), items[2])
    assert [d.name for d in cache.policy_documents(changed).documents] == ["k8sdemo", "demo2"]
    assert cache.parses == 4
    broken = cache.policy_documents([SnapshotItem("b.yaml", "kind: [unclosed\n")])
    assert broken.documents == ()
    assert len(broken.errors) == 1 and "b.yaml" in str(broken.errors[0])
