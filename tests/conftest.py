"""Shared pytest setup for every test dir: the real-Kubernetes fixtures (kube_cluster, kube_namespace;
node_cluster, node_namespace), where the Gatekeeper library samples are (tests.support.samples), whether
the cel-go library is built (tests.support.native) and the `helm` built for the chart's tests
(tests.support.helm), and headless Chromium for the pages celkeeper writes (tests.support.browser)."""

pytest_plugins = [
    "tests.support.kube_fixtures",
    "tests.support.node_fixtures",
    "tests.support.samples",
    "tests.support.native",
    "tests.support.helm",
    "tests.support.browser",
]
