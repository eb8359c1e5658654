"""`celkeeper test` on 100 ValidatingAdmissionPolicy bindings x 1,000 objects, against applying the same
objects through a real kube-apiserver with `kubectl create --dry-run=server` (the API server at the native
library's Kubernetes version, hack/admissionpolicy/build.sh, with the same policies and Namespaces).

Two shapes of the same size, printed side by side in one run:
- `spread`: 100 policies over ten kinds (ConfigMaps, Secrets, Deployments, StatefulSets, Jobs, CronJobs, Pods,
  Services, ServiceAccounts, Ingresses: ten each), 1,000 objects of those kinds: each object meets ten;
- `dense`: 100 policies on two kinds (ConfigMaps and Deployments, fifty each), 1,000 objects of those kinds:
  each object meets fifty, and the API server's own per-policy work (the same code in both) dominates.

Each tool runs as a user runs it, a fresh process (celkeeper with Python's start-up and the native library's
load; kubectl create, then kubectl apply, which reads each object first, over the same file); the policies are
in force before kubectl's runs are timed (a sentinel object is denied). Prints the wall and CPU seconds of
each, how many objects each denies (they must agree), and how many times faster celkeeper is. Needs the API
server (skips without it).

    .venv/bin/python bench/admission_policies.py [--objects N] [--shape spread|dense|both] [--rounds N]
                                                 [--baseline DIR]

`--rounds N` times each tool N times in turn (so that load from elsewhere hits them alike); `--baseline DIR`
also times the celkeeper package of another checkout (its own native library) in the same rounds, which
of the two runs first alternating: before/after figures with the same kubectl beside them.

`--dump DIR` only writes each shape's files (DIR/<shape>/policies.json, namespaces.json, objects.json), for
`celkeeper test -f` by hand or the Go benchmark that replays them (celkeeper/native/go/admissionpolicy/
workload_test.go: `ADMISSIONPOLICY_WORKLOAD=DIR/dense go test -run XXX -bench Workload ./admissionpolicy/`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.binaries import BinariesUnavailable  # noqa: E402

AR = "admissionregistration.k8s.io/v1"
NAMESPACES = 4


def _policy(
    shape: str, name: str, group: str, resource_: str, validations: list[dict[str, str]]
) -> list[dict[str, Any]]:
    rule = {
        "apiGroups": [group],
        "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"],
        "resources": [resource_],
    }
    policy = {
        "apiVersion": AR,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [rule]},
            "variables": [{"name": "owner", "expression": "object.metadata.?labels.?owner.orValue('')"}],
            "validations": [
                *validations,
                {"expression": "variables.owner != 'nobody'", "message": "owner nobody"},
            ],
        },
    }
    n = int(name.rsplit("-", 1)[1])
    binding = {
        "apiVersion": AR,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"] if n % 3 else ["Warn"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"bench": shape}}},
        },
    }
    return [policy, binding]


def _containers(rng: random.Random) -> list[dict[str, Any]]:
    return [
        {
            "name": f"c{x}",
            "image": rng.choice(["nginx:1.27", "nginx", "busybox:1.36"]),
            **({"resources": {"limits": {"memory": "64Mi"}}} if rng.random() < 0.6 else {}),
        }
        for x in range(rng.randint(1, 3))
    ]


_CONTAINERS = "object.spec.template.spec.containers"
WORKLOAD_CHECKS = [
    (f"{_CONTAINERS}.all(c, c.image.contains(':'))", "'untagged image'"),
    (
        f"{_CONTAINERS}.all(c, has(c.resources.limits) && 'memory' in c.resources.limits)",
        f"'no memory limit: ' + {_CONTAINERS}.filter(c, !has(c.resources.limits)).map(c, c.name).join(', ')",
    ),
]


def _kinds(shape: str) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
    """(group, resource, kind, validations) of the kinds the policies check."""
    configmaps = (
        "",
        "configmaps",
        "ConfigMap",
        [("!has(object.data) || object.data.size() <= 6", "'keys: ' + string(object.data.size())")],
    )
    deployments = (
        "apps",
        "deployments",
        "Deployment",
        [("object.spec.replicas <= 5", "'replicas ' + string(object.spec.replicas)"), *WORKLOAD_CHECKS],
    )
    if shape == "dense":
        return [configmaps, deployments]
    return [
        configmaps,
        deployments,
        ("", "secrets", "Secret", [("object.type != 'kubernetes.io/basic-auth'", "'basic auth'")]),
        (
            "apps",
            "statefulsets",
            "StatefulSet",
            [("object.spec.replicas <= 3", "'replicas'"), *WORKLOAD_CHECKS],
        ),
        (
            "batch",
            "jobs",
            "Job",
            [("object.spec.?backoffLimit.orValue(6) <= 4", "'backoffLimit'"), *WORKLOAD_CHECKS],
        ),
        ("batch", "cronjobs", "CronJob", [("!object.spec.schedule.startsWith('*')", "'every minute'")]),
        (
            "",
            "pods",
            "Pod",
            [
                ("object.spec.containers.all(c, c.image.contains(':'))", "'untagged'"),
                ("object.spec.containers.size() <= 2", "'too many containers'"),
            ],
        ),
        ("", "services", "Service", [("object.spec.type != 'NodePort'", "'node port'")]),
        (
            "",
            "serviceaccounts",
            "ServiceAccount",
            [("object.?automountServiceAccountToken.orValue(true) == false", "'token automounted'")],
        ),
        (
            "networking.k8s.io",
            "ingresses",
            "Ingress",
            [("object.spec.rules.all(r, has(r.host))", "'rule without host'")],
        ),
    ]


def _object(kind: str, name: str, namespace: str, rng: random.Random) -> dict[str, Any]:
    meta = {
        "name": name,
        "namespace": namespace,
        "labels": {"owner": rng.choice(["a", "b", "b", "nobody"]), "app": name},
    }
    pod_spec = {
        "containers": _containers(rng),
        "restartPolicy": "Never" if kind in ("Job", "CronJob") else "Always",
    }
    template = {"metadata": {"labels": {"app": name}}, "spec": pod_spec}
    body: dict[str, Any]
    if kind == "ConfigMap":
        body = {"data": {f"k{x}": "v" for x in range(rng.randint(1, 9))}}
    elif kind == "Secret":
        body = {
            "type": rng.choice(["Opaque", "kubernetes.io/basic-auth"]),
            "stringData": {"username": "u", "password": "p"},
        }
    elif kind == "Deployment":
        body = {
            "spec": {
                "replicas": rng.randint(1, 8),
                "selector": {"matchLabels": {"app": name}},
                "template": template,
            }
        }
    elif kind == "StatefulSet":
        body = {
            "spec": {
                "replicas": rng.randint(1, 5),
                "serviceName": name,
                "selector": {"matchLabels": {"app": name}},
                "template": template,
            }
        }
    elif kind == "Job":
        body = {"spec": {"backoffLimit": rng.randint(0, 8), "template": {"spec": pod_spec}}}
    elif kind == "CronJob":
        body = {
            "spec": {
                "schedule": rng.choice(["*/5 * * * *", "0 * * * *"]),
                "jobTemplate": {"spec": {"template": {"spec": pod_spec}}},
            }
        }
    elif kind == "Pod":
        body = {"spec": {"containers": _containers(rng)}}
    elif kind == "Service":
        body = {
            "spec": {
                "type": rng.choice(["ClusterIP", "NodePort"]),
                "selector": {"app": name},
                "ports": [{"port": 80}],
            }
        }
    elif kind == "ServiceAccount":
        body = {"automountServiceAccountToken": rng.choice([True, False])}
    else:
        rules = [
            {
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "s", "port": {"number": 80}}},
                        }
                    ]
                }
            }
        ]
        if rng.random() < 0.7:
            rules[0]["host"] = "example.com"
        body = {"spec": {"rules": rules}}
    api = {
        "Deployment": "apps/v1",
        "StatefulSet": "apps/v1",
        "Job": "batch/v1",
        "CronJob": "batch/v1",
        "Ingress": "networking.k8s.io/v1",
    }
    return {"apiVersion": api.get(kind, "v1"), "kind": kind, "metadata": meta, **body}


def generate(shape: str, objects: int, folder: Path) -> tuple[Path, Path, Path]:
    """(policies, namespaces, objects) files."""
    rng = random.Random(7)
    kinds = _kinds(shape)
    docs: list[dict[str, Any]] = []
    for i in range(100):
        group, resource_, _, checks = kinds[i % len(kinds)]
        chosen = checks[: 1 + i % len(checks)]
        docs += _policy(
            shape,
            f"{shape}-{i}",
            group,
            resource_,
            [{"expression": e, "messageExpression": m} for e, m in chosen],
        )
    namespaces = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": f"{shape}-{n}", "labels": {"bench": shape}},
        }
        for n in range(NAMESPACES)
    ]
    items = [
        _object(kinds[j % len(kinds)][2], f"o-{j}", f"{shape}-{j % NAMESPACES}", rng) for j in range(objects)
    ]
    out = []
    for name, content in (("policies", docs), ("namespaces", namespaces), ("objects", items)):
        path = folder / shape / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": content}), encoding="utf-8")
        out.append(path)
    return out[0], out[1], out[2]


def _timed(
    argv: list[str], env: dict[str, str] | None = None, cwd: str | Path | None = None
) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def run_shape(
    cluster: Any, shape: str, objects: int, folder: Path, rounds: int, baseline: str | None
) -> None:
    policies, namespaces, items = generate(shape, objects, folder)
    cluster.kubectl("create", "-f", str(namespaces))
    cluster.kubectl("create", "-f", str(policies))
    probe = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "probe", "namespace": f"{shape}-0", "labels": {"owner": "nobody"}},
    }
    deadline = time.monotonic() + 120
    while cluster.kubectl("create", "--dry-run=server", "-f", "-", input=probe, check=False).returncode == 0:
        if time.monotonic() > deadline:
            raise SystemExit("the policies did not come into force")
        time.sleep(0.5)
    celkeeper = [sys.executable, "-m", "celkeeper", "test", "-f", str(policies), "-f", str(namespaces)]
    # each package from its checkout (`-m` puts the working directory first on the path), with its library
    ours: dict[str, tuple[dict[str, str] | None, str | Path]] = {"celkeeper test": (None, ROOT)}
    if baseline is not None:
        ours["baseline celkeeper test"] = ({**os.environ, "PYTHONPATH": baseline}, baseline)
    for round_ in range(rounds):
        walls = {}
        order = list(ours.items())
        for label, (env, cwd) in order[::-1] if round_ % 2 else order:  # the first after kubectl alternates
            wall, cpu, done = _timed([*celkeeper, "-f", str(items)], env=env, cwd=cwd)
            denied = sum(1 for line in done.stdout.splitlines() if ": denied (" in line)
            walls[label] = wall
            print(f"{shape:6}  {label:32} {wall:6.2f} s wall {cpu:5.2f} s cpu   denied {denied}")
        for verb in ("create", "apply"):
            argv = [str(cluster.binaries.kubectl), verb, "--dry-run=server", "-f", str(items)]
            wall, cpu, theirs = _timed(argv, env=cluster.kubectl_env())
            faster = ", ".join(f"{label.split()[0]} {wall / w:4.1f}x" for label, w in walls.items())
            print(
                f"{shape:6}  kubectl {verb:6} --dry-run=server {wall:6.2f} s wall {cpu:5.2f} s cpu   "
                f"denied {theirs.stderr.count('denied request')}   (kubectl's CPU; faster: {faster})"
            )
        print(f"{shape:6}  load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--shape", choices=("spread", "dense", "both"), default="both")
    parser.add_argument("--dump", metavar="DIR", help="only write each shape's files under DIR")
    parser.add_argument("--rounds", type=int, default=1, help="times each tool is run, in turn")
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="also time the celkeeper package of another checkout (e.g. `git worktree add DIR main`), in the "
        "same rounds: before/after figures",
    )
    args = parser.parse_args()
    shapes = ("spread", "dense") if args.shape == "both" else (args.shape,)
    if args.dump:
        for shape in shapes:
            print(*generate(shape, args.objects, Path(args.dump)))
        return 0
    from tests.admissionpolicy.differential import native_binaries
    from tests.support.apiserver import ControlPlane

    try:
        binaries = native_binaries()
    except BinariesUnavailable as exc:
        print(f"skipped: {exc}")
        return 0
    baseline = str(Path(args.baseline).resolve()) if args.baseline else None
    print(f"100 bindings x {args.objects} objects, kube-apiserver v{binaries.kube_version}")
    if baseline is not None:
        print(f"baseline: the celkeeper package at {baseline}")
    with (
        tempfile.TemporaryDirectory(prefix="celkeeper-bench-") as tmp,
        ControlPlane(binaries=binaries) as cluster,
    ):
        for shape in shapes:
            run_shape(cluster, shape, args.objects, Path(tmp), args.rounds, baseline)  # namespaces of its own
    return 0


if __name__ == "__main__":
    sys.exit(main())
