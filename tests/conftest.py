"""Shared pytest setup: the real-Kubernetes fixtures (kube_cluster, kube_namespace) for every test dir."""

pytest_plugins = ["tests.support.kube_fixtures"]
