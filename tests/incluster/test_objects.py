"""API objects as policy sources (pure): what of a watched object a snapshot keeps."""

from __future__ import annotations

from celkeeper.incluster.objects import policy_object
from tests.incluster.support import required_labels_template, with_meta


def test_policy_objects_keep_what_defines_the_policy_only() -> None:
    template = with_meta(required_labels_template("Keep"), "t1")
    template["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{...}",
        "team": "x",
    }
    kept = policy_object(template)
    assert set(kept) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(kept["metadata"]) == {"name", "uid", "generation", "annotations"}
    assert kept["metadata"]["annotations"] == {"team": "x"}
