"""Shared pytest setup for every test dir: the real-Kubernetes fixtures (kube_cluster, kube_namespace;
node_cluster, node_namespace), where the Gatekeeper library samples are (tests.support.samples), whether
the cel-go library is built (tests.support.native) and the `helm` built for the chart's tests
(tests.support.helm), and headless Chromium for the pages celkeeper writes (tests.support.browser); the
groups of tests pytest-xdist keeps on one worker, and the order it starts them in."""

from __future__ import annotations

import pytest

NODE_TESTS = "tests/e2e/node/"
E2E_TESTS = "tests/e2e/"

pytest_plugins = [
    "tests.support.kube_fixtures",
    "tests.support.node_fixtures",
    "tests.support.samples",
    "tests.support.native",
    "tests.support.helm",
    "tests.support.browser",
]


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist hands the groups to its workers in the order of the collection
    (`pytest_collection_modifyitems` below), not reordered by how many tests each group has: a group's
    count of tests says nothing of its time (one test of tests/e2e runs for a minute and more, a file
    of thousands of small cases for seconds), and a long group handed out last is a tail that one
    worker runs while the other idles."""
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist 3.7+ reorders unless told not to
        config.option.loadscopereorder = False


def _start_rank(path: str) -> int:
    """When a group starts: the node's tests first (the longest group, minutes of one real node), then
    the other end-to-end files (each its own control plane, installation or tool run, most of them a
    minute or more), then the rest (seconds each) in the collection's order."""
    if path.startswith(NODE_TESTS):
        return 0
    return 1 if path.startswith(E2E_TESTS) else 2


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (its own hook of this name)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The groups pytest-xdist keeps on one worker (`./dev test` runs `-n 2 --dist loadgroup`): each
    test file is a group (its module-scoped fixtures, e.g. a control plane, are made once), and every
    test of a real node is one group (one node runs on the machine at a time: its teardown tests check
    that nothing of a node is left behind, which another node's processes would contradict); a test
    marked with a group of its own keeps it (tests/e2e/gatekeeper's files share their control planes).
    The longest groups are collected first (`_start_rank`; the order within a rank, and within a file,
    is the collection's), so they start first and the short ones fill in at the end."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        path = item.nodeid.split("::", 1)[0]
        group = "node" if path.startswith(NODE_TESTS) else path
        item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: _start_rank(item.nodeid))
