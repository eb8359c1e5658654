#!/usr/bin/env python3
"""Write celkeeper/native/go/admissionpolicy/builtin_resources.json: the built-in resources a real
kube-apiserver serves (group, version, resource, kind, scope, subresources with their kinds), from its
discovery, so that the native library maps kinds to resources offline as that API server does.

    CELKEEPER_KUBE_ASSETS=~/.cache/celkeeper-kube/1.36.2 .venv/bin/python hack/admissionpolicy/discovery.py

The API server must be the Kubernetes version the native library is built with (k8s.io/kubernetes in
celkeeper/native/go/go.mod): hack/admissionpolicy/build.sh builds it. The admission policy differential
(tests/admissionpolicy/test_policies_apiserver.py) checks the file against that API server's discovery.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.apiserver import ControlPlane  # noqa: E402

OUT = ROOT / "celkeeper" / "native" / "go" / "admissionpolicy" / "builtin_resources.json"


def discover(cluster: ControlPlane) -> list[dict[str, Any]]:
    """Every resource of the API server's own groups (no CRD is installed on a fresh control plane)."""
    paths = ["/api/v1"]
    _, body = cluster.request("/apis")
    for group in json.loads(body)["groups"]:
        paths += [f"/apis/{v['groupVersion']}" for v in group["versions"]]
    out: list[dict[str, Any]] = []
    for path in paths:
        _, body = cluster.request(path)
        listing = json.loads(body)
        group, _, version = listing["groupVersion"].rpartition("/")
        tops: dict[str, dict[str, Any]] = {}
        subs: list[dict[str, Any]] = []
        for res in listing["resources"]:
            if "/" in res["name"]:
                subs.append(res)
                continue
            tops[res["name"]] = {
                "group": group,
                "version": version,
                "resource": res["name"],
                "kind": res["kind"],
                "namespaced": res["namespaced"],
            }
        for sub in subs:
            parent, _, name = sub["name"].partition("/")
            entry = tops[parent]
            entry.setdefault("subresources", []).append(
                {
                    "name": name,
                    "group": sub.get("group", group),
                    "version": sub.get("version", version),
                    "kind": sub["kind"],
                }
            )
        out += tops.values()
    return sorted(out, key=lambda r: (r["group"], r["version"], r["resource"]))


def main() -> int:
    with ControlPlane() as cluster:
        resources = discover(cluster)
    OUT.write_text(json.dumps(resources, indent=1) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {len(resources)} resources", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
