"""The structural-schema checker (celkeeper.crds.structural_errors) against a real kube-apiserver: the
server accepts every schema the checker calls structural, and refuses every one the checker refuses,
naming the same field. Each schema is tried as the root schema of a throw-away CRD (server-side dry-run)."""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

import pytest

from celkeeper.crds import structural_errors
from tests.crds.test_structural import NON_STRUCTURAL, ROOT_NON_STRUCTURAL, STRUCTURAL
from tests.support.apiserver import ControlPlane

pytestmark = pytest.mark.kube


def probe_crd(root_schema: dict[str, Any]) -> dict[str, Any]:
    suffix = secrets.token_hex(4)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"probes{suffix}.structural.celkeeper.test"},
        "spec": {
            "group": "structural.celkeeper.test",
            "scope": "Cluster",
            "names": {
                "plural": f"probes{suffix}",
                "singular": f"probe{suffix}",
                "kind": f"Probe{suffix}",
                "listKind": f"Probe{suffix}List",
            },
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": root_schema}}
            ],
        },
    }


def server_accepts(cluster: ControlPlane, root_schema: dict[str, Any]) -> tuple[bool, str]:
    proc = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=probe_crd(root_schema), check=False)
    return proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("schema", STRUCTURAL, ids=lambda s: json.dumps(s)[:60])
def test_the_server_accepts_what_the_checker_calls_structural(
    kube_cluster: ControlPlane, schema: Any
) -> None:
    root_schema = {"type": "object", "properties": {"spec": schema}}
    assert structural_errors(root_schema, root=True) == []
    accepted, stderr = server_accepts(kube_cluster, root_schema)
    assert accepted, stderr


@pytest.mark.parametrize(("schema", "path", "message"), NON_STRUCTURAL, ids=lambda v: str(v)[:60])
def test_the_server_refuses_what_the_checker_refuses(
    kube_cluster: ControlPlane, schema: Any, path: str, message: str
) -> None:
    accepted, stderr = server_accepts(kube_cluster, {"type": "object", "properties": {"spec": schema}})
    assert not accepted, f"the server accepted a schema the checker refuses ({path}: {message})"
    assert_names_the_field(stderr, "properties[spec]." + server_path(path))


@pytest.mark.parametrize(("schema", "path", "message"), ROOT_NON_STRUCTURAL, ids=lambda v: str(v)[:60])
def test_the_server_refuses_root_schemas_the_checker_refuses(
    kube_cluster: ControlPlane, schema: Any, path: str, message: str
) -> None:
    accepted, stderr = server_accepts(kube_cluster, schema)
    assert not accepted, f"the server accepted a root schema the checker refuses ({path}: {message})"
    assert_names_the_field(stderr, server_path(path))


def server_path(path: str) -> str:
    """A checker path (properties.a.items) as the API server writes it (properties[a].items)."""
    return re.sub(r"properties\.([^.\[]+)", r"properties[\1]", path).replace("properties[[", "properties[")


def assert_names_the_field(stderr: str, path: str) -> None:
    """The server's error names the same field as the checker (kubectl may elide the middle of long paths)."""
    assert "openAPIV3Schema" in stderr, stderr
    line = next(line for line in stderr.splitlines() if "openAPIV3Schema" in line)
    where = line.split("openAPIV3Schema", 1)[1].split(": ", 1)[0]
    if "..." in where:
        tail = path.rsplit(".", 1)[-1]
        assert tail in where or tail in line, (path, stderr)
    else:
        where = where.lstrip(".")
        assert path in line or where.startswith(path) or path.startswith(where), (path, stderr)
