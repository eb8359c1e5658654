"""Shared pytest setup for every test dir: the real-Kubernetes fixtures (kube_cluster, kube_namespace)
and where the Gatekeeper library samples are (tests.support.samples)."""

pytest_plugins = ["tests.support.kube_fixtures", "tests.support.samples"]
