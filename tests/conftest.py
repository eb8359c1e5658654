"""Shared pytest setup for every test dir: the real-Kubernetes fixtures (kube_cluster, kube_namespace;
node_cluster, node_namespace), where the Gatekeeper library samples are (tests.support.samples), whether
the cel-go library is built (tests.support.native) and the `helm` built for the chart's tests
(tests.support.helm), and headless Chromium for the pages celkeeper writes (tests.support.browser)."""

import pytest

NODE_TESTS = "tests/e2e/node/"

pytest_plugins = [
    "tests.support.kube_fixtures",
    "tests.support.node_fixtures",
    "tests.support.samples",
    "tests.support.native",
    "tests.support.helm",
    "tests.support.browser",
]


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (its own hook of this name)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The groups pytest-xdist keeps on one worker (`./dev test` runs `-n 2 --dist loadgroup`): each
    test file is a group (its module-scoped fixtures, e.g. a control plane, are made once), and every
    test of a real node is one group (one node runs on the machine at a time: its teardown tests check
    that nothing of a node is left behind, which another node's processes would contradict)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        path = item.nodeid.split("::", 1)[0]
        group = "node" if path.startswith(NODE_TESTS) else path
        item.add_marker(pytest.mark.xdist_group(group))
