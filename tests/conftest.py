"""Shared pytest setup for every test dir: the real-Kubernetes fixtures (kube_cluster, kube_namespace;
node_cluster, node_namespace), where the Gatekeeper library samples are (tests.support.samples), whether
the cel-go library is built (tests.support.native) and the `helm` built for the chart's tests
(tests.support.helm), and headless Chromium for the pages celkeeper writes (tests.support.browser); the
groups of tests pytest-xdist keeps on one worker, and the order it starts them in."""

from __future__ import annotations

from typing import Any

import pytest

NODE_TESTS = "tests/e2e/node/"
E2E_TESTS = "tests/e2e/"
#: folders whose files share one group: a real node's tests (one node runs on the machine at a time: its
#: teardown tests check that nothing of a node is left behind, which another node's processes would
#: contradict), the Gatekeeper differential's (they share the session's two control planes and
#: Gatekeeper's manager)
SHARED_GROUPS = {NODE_TESTS: "node", "tests/e2e/gatekeeper/": "gatekeeper"}

pytest_plugins = [
    "tests.support.kube_fixtures",
    "tests.support.node_fixtures",
    "tests.support.samples",
    "tests.support.native",
    "tests.support.helm",
    "tests.support.browser",
]


def group_of(nodeid: str) -> str:
    """The group of a test (`./dev test` runs `-n 2 --dist loadgroup`): its folder's in SHARED_GROUPS,
    else its file (the file's module-scoped fixtures, e.g. a control plane, are made once)."""
    path = nodeid.split("::", 1)[0]
    for folder, group in SHARED_GROUPS.items():
        if path.startswith(folder):
            return group
    return path


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist hands the groups to its workers in the order of the collection
    (`pytest_collection_modifyitems` below), not reordered by how many tests each group has: a group's
    count of tests says nothing of its time (one test of tests/e2e runs for a minute and more, a file
    of thousands of small cases for seconds), and a long group handed out last is a tail that one
    worker runs while the other idles."""
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist 3.7+ reorders unless told not to
        config.option.loadscopereorder = False


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` grouped by `group_of`. pytest-xdist's own loadgroup reads a test's group from a
    suffix it appends to the test's id, which pytest 9.2 no longer lets it change (`nodeid` is derived):
    every test was a group of its own, each file's module fixtures made again on both workers and the
    node's tests run on both at once."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)


def _start_rank(path: str) -> int:
    """When a group starts: the node's tests first (the longest group, minutes of one real node), then
    the other end-to-end files (each its own control plane, installation or tool run, most of them a
    minute or more), then the rest (seconds each) in the collection's order."""
    if path.startswith(NODE_TESTS):
        return 0
    return 1 if path.startswith(E2E_TESTS) else 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest groups are collected first (`_start_rank`; the order within a rank, and within a file,
    is the collection's), so they start first and the short ones fill in at the end. Each test is marked
    with its group (`xdist_group`), as pytest-xdist's own loadgroup reads it."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group_of(item.nodeid)))
    items.sort(key=lambda item: _start_rank(item.nodeid))
