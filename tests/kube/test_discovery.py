"""Discovery (celkeeper.kube.discovery) on a fake of our own Client: each resource in its group's preferred
version, broken groups reported."""

from __future__ import annotations

from celkeeper.kube import discover
from tests.kube.fakes import FakeClient


def test_discovery_gives_each_resource_in_its_preferred_version_and_reports_broken_groups() -> None:
    fake = FakeClient()
    fake.paths = {
        "/api": {"versions": ["v1"]},
        "/api/v1": {
            "resources": [
                {"name": "pods", "kind": "Pod", "namespaced": True, "verbs": ["get", "list", "watch"]},
                {"name": "pods/status", "kind": "Pod", "namespaced": True, "verbs": ["get", "update"]},
                {"name": "bindings", "kind": "Binding", "namespaced": True, "verbs": ["create"]},
            ]
        },
        "/apis": {
            "groups": [
                {
                    "name": "widgets.example.com",
                    "preferredVersion": {"version": "v2"},
                    "versions": [{"version": "v1"}, {"version": "v2"}, {"version": "v3alpha1"}],
                },
                {
                    "name": "metrics.k8s.io",
                    "preferredVersion": {"version": "v1beta1"},
                    "versions": [{"version": "v1beta1"}],
                },
            ]
        },
        "/apis/widgets.example.com/v1": {
            "resources": [
                {"name": "widgets", "kind": "Widget", "namespaced": True, "verbs": ["list"]},
                {"name": "gadgets", "kind": "Gadget", "namespaced": False, "verbs": ["list"]},
            ]
        },
        "/apis/widgets.example.com/v2": {
            "resources": [
                {"name": "widgets", "kind": "Widget", "namespaced": True, "verbs": ["list"]},
            ]
        },
        "/apis/widgets.example.com/v3alpha1": {
            "resources": [
                {"name": "widgets", "kind": "Widget", "namespaced": True, "verbs": ["list"]},
                {"name": "sprockets", "kind": "Sprocket", "namespaced": True, "verbs": ["list"]},
            ]
        },
    }
    found = discover(fake)
    by_name = {str(r): (r.version, r.listable, r.namespaced) for r in found.resources}
    assert by_name == {
        "pods": ("v1", True, True),
        "bindings": ("v1", False, True),
        "widgets.widgets.example.com": ("v2", True, True),  # the preferred version
        "gadgets.widgets.example.com": ("v1", True, False),  # only served there
        "sprockets.widgets.example.com": ("v3alpha1", True, True),
    }
    assert len(found.errors) == 1 and found.errors[0].startswith("metrics.k8s.io/v1beta1: 404")
