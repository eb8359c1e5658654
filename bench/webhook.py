#!/usr/bin/env python3
"""Throughput and latency of `celkeeper serve` over loopback HTTPS.

A realistic Pod AdmissionReview (a Deployment's pod, ~4 KB, compliant: the answer is `allowed`) is
reviewed against 20 constraints that all select Pods (the Pod constraints of examples/, plus copies
under other names: 12 templates, 8 of them with two constraints). The copies have their originals'
parameters, and the webhook evaluates the constraints of one template with equal parameters once;
`--distinct-params` gives each copy parameters of its own that still allow the Pod (`_distinct`),
which measures constraints whose parameters differ. For 1 and 2 Gunicorn workers it prints:
  - closed loop at fixed concurrency: reviews/s, p50, p99;
  - open loop at half that rate (or --open-rate): requests are sent on a fixed schedule (paced
    per wrk thread), p50 and p99; the schedule is not corrected for coordinated omission (at half
    load the server is rarely behind);
  - the time per review the workers' threads spent runnable but waiting for a CPU (the scheduler's
    run_delay): their main threads (which serve the requests: latency added by CPU contention, not
    by the server's code) and their other threads (the Go runtime's, the metrics flusher, ...);
  - CPU time per review of the server (workers) and of the load generator, and how the work fell
    on the workers (a keep-alive connection stays with the worker that accepted it: wrk opens its
    connections at once, and one worker may win most of them);
  - the workers' memory growth per review;
  - the same Pod breaking some policies (`denied_pod`: no owner label, an image from Docker Hub tagged
    latest), closed loop on the same server: its server CPU per review against the allowed one's.
Workers are not replaced while measuring (`--max-requests 0` unless given).
Then, for the largest worker count, the same request against the same 20 constraints re-targeted
to Deployments (none selects the Pod): the ceiling of the serving stack itself (TLS, Gunicorn,
WSGI, JSON, metrics) without policy evaluation.

Load generator: `wrk` (Debian package `wrk`: `apt-get install -y wrk`) when installed, else a
Python client (threads, keep-alive connections), which on 2 cores is itself the bottleneck.

    .venv/bin/python bench/webhook.py [--duration 10] [--connections 8] [--threads 1] [--repeat N]
                                      [--open-rate R] [--workers 1 2] [--engine NAME] [--ceiling-only]
                                      [--baseline DIR [--rounds N]] [--client-cpus LIST] [--loops N]

`--client-cpus 1` runs wrk on CPU 1 only (taskset): with the run-queue wait, what the load generator's
share of the 2 cores does to the tail.

`--baseline DIR` (another checkout, e.g. `git archive main | tar -x -C DIR`; its cel-go library must be
built) measures the same workload served by that tree's celkeeper too, alternating with this one's
(this, baseline, `--rounds` times per server configuration), and ends with the ratio of the server
CPU per review of each mode (this / baseline): before/after figures from one run. Put both trees in
the same kind of place (e.g. both `git archive` copies under /tmp, running this script from one of
them): on the shared machine a worktree under /work measured ~1.2x a copy under /tmp of nearly the
same code, the serving stack alone included.

`--loops 1` serves with one event loop (thread) per worker instead of the server's default two: with
`--workers 1`, what the second loop costs per review.

`--engine cel-python --ceiling-only` against the default measures the serving stack without and with
the Go runtime in the workers (no constraint matches: nothing is evaluated either way).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.support.load import Result, rss_mib, run_python, run_wrk, worker_split  # noqa: E402
from celkeeper.documents import parse_documents  # noqa: E402
from tests.support.serve import ServeProcess, review  # noqa: E402

EXAMPLES = ROOT / "examples"
CONSTRAINTS = 20
NAMESPACE = "prod-shop"
DIGEST = "@sha256:" + "3f2a" * 16


# -- the workload ----------------------------------------------------------------------------------------


def _container(
    name: str, image: str, port: int, cpu: tuple[str, str], mem: tuple[str, str]
) -> dict[str, Any]:
    probe = {"httpGet": {"path": "/healthz", "port": port}, "periodSeconds": 10}
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "env": [
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
        ],
        "resources": {
            "requests": {"cpu": cpu[0], "memory": mem[0]},
            "limits": {"cpu": cpu[1], "memory": mem[1]},
        },
        "livenessProbe": probe,
        "readinessProbe": probe,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/web", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            {
                "name": "kube-api-access",
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": True,
            },
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def bench_pod() -> dict[str, Any]:
    """What a Deployment's ReplicaSet creates: labels, owner, two containers, probes, volumes."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "web-7d4b9c8f6d-",
            "name": "web-7d4b9c8f6d-x2k8p",
            "namespace": NAMESPACE,
            "labels": {
                "app.kubernetes.io/name": "web",
                "app.kubernetes.io/component": "server",
                "app.kubernetes.io/part-of": "shop",
                "pod-template-hash": "7d4b9c8f6d",
                "owner": "team-shop",
            },
            "annotations": {
                "kubectl.kubernetes.io/restartedAt": "2025-01-10T09:00:00Z",
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-7d4b9c8f6d",
                    "uid": "5f0c6a52-0d4e-4a43-9d6b-6c1f0c9b7e21",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "serviceAccountName": "web",
            "securityContext": {
                "runAsNonRoot": True,
                "fsGroup": 2000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                _container(
                    "web",
                    f"registry.example.com/shop/web:1.4.2{DIGEST}",
                    8080,
                    ("250m", "500m"),
                    ("128Mi", "256Mi"),
                ),
                _container(
                    "proxy",
                    f"registry.example.com/platform/proxy:2.1.0{DIGEST}",
                    15001,
                    ("100m", "200m"),
                    ("64Mi", "128Mi"),
                ),
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
                {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
                {
                    "name": "kube-api-access",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                        ],
                    },
                },
            ],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "priority": 0,
            "enableServiceLinks": True,
        },
    }


def denied_pod() -> dict[str, Any]:
    """The same Pod breaking some of the policies (no owner label, an image from Docker Hub tagged
    latest): a denial with several messages."""
    pod = bench_pod()
    del pod["metadata"]["labels"]["owner"]
    pod["spec"]["containers"][0]["image"] = "docker.io/library/nginx:latest"
    return pod


def write_policies(out: Path, retarget: bool = False, distinct: bool = False) -> list[str]:
    """Templates and 20 Pod constraints from examples/ (copies renamed to reach 20). Their names.
    With `retarget`, the constraints select Deployments instead (and so not the bench's Pod). With
    `distinct`, each copy's parameters are made its own (`_distinct`): they then differ, as a real
    policy's would, and the webhook cannot share their values with the originals'."""
    out.mkdir(parents=True)
    pod_constraints: list[tuple[Path, dict[str, Any]]] = []
    for template in sorted(EXAMPLES.glob("*/template.yaml")):
        for path in sorted(template.parent.glob("constraint*.yaml")):
            for doc in parse_documents(path.read_text(), str(path)).documents:
                kinds = (doc.data.get("spec", {}).get("match", {}) or {}).get("kinds", [])
                if any("Pod" in (k.get("kinds") or []) for k in kinds):
                    pod_constraints.append((template, doc.data))
    if not pod_constraints:
        raise SystemExit("bench: no Pod constraints found in examples/")
    names = []
    for i in range(CONSTRAINTS):
        template, data = pod_constraints[i % len(pod_constraints)]
        copy = json.loads(json.dumps(data))
        if i >= len(pod_constraints):
            copy["metadata"]["name"] = f"{data['metadata']['name']}-copy{i // len(pod_constraints)}"
        names.append(copy["metadata"]["name"])
        if retarget:
            copy["spec"]["match"]["kinds"] = [{"apiGroups": ["apps"], "kinds": ["Deployment"]}]
        if distinct and i >= len(pod_constraints):
            copy["spec"]["parameters"] = _distinct(copy["spec"].get("parameters"), f"bench-copy-{i}")
        folder = out / template.parent.name
        folder.mkdir(exist_ok=True)
        shutil.copy(template, folder / "template.yaml")
        (folder / f"constraint-{i}.json").write_text(json.dumps(copy, indent=1))
    return names


def _distinct(value: Any, marker: str, key: str = "") -> Any:
    """Parameters of their own that still allow the bench's Pod (main() checks the answer): lists of
    strings and of objects get an item of their own (`marker`, which the Pod does not carry), a
    quantity such as "2Gi" is written "2.0Gi" (the same quantity), an int `max` grows by one;
    `required*` lists are left as they are."""
    if key.startswith("required"):
        return value
    if isinstance(value, dict):
        return {k: _distinct(v, marker, k) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return [*value, marker]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [*value, {k: f"/{marker}" if isinstance(v, str) else v for k, v in value[0].items()}]
    if isinstance(value, str) and re.fullmatch(r"\d+[A-Za-z]{0,2}", value):
        digits = re.match(r"\d+", value).group(0)  # type: ignore[union-attr]
        return f"{digits}.0{value[len(digits) :]}"
    if key == "max" and type(value) is int:
        return value + 1
    return value


def write_namespaces(path: Path) -> None:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": NAMESPACE,
                    "labels": {
                        "kubernetes.io/metadata.name": NAMESPACE,
                        "security.example.com/profile": "restricted",
                    },
                },
            }
        )
    )


def folder_serve_args(work: Path, max_requests: int = 0) -> list[str]:
    """The `celkeeper serve` options of a benchmark's server on its folder of policies: the Namespace
    write_namespaces wrote in `work`, warnings only, and --max-requests (0: no worker replaced while
    measuring)."""
    return [
        "--namespaces",
        str(work / "namespaces.yaml"),
        "--log-level",
        "warning",
        "--max-requests",
        str(max_requests),
    ]


# -- main ---------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=int, default=10, help="seconds per measurement (default 10)")
    parser.add_argument("--connections", type=int, default=8, help="concurrent connections (default 8)")
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (default 1)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts (default 1 2)")
    parser.add_argument(
        "--loops",
        type=int,
        default=None,
        metavar="N",
        help="event loops (threads) per worker: the server's --threads (default: the server's default)",
    )
    parser.add_argument(
        "--max-requests",
        type=int,
        default=0,
        metavar="N",
        help="the server's --max-requests (default 0: no worker is replaced while measuring)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="measure N times per server (closed loop, then open loop; default 1)",
    )
    parser.add_argument(
        "--open-rate",
        type=float,
        default=0,
        metavar="R",
        help="the open loop's rate in reviews/s (default: half the closed-loop rate)",
    )
    parser.add_argument(
        "--distinct-params",
        action="store_true",
        help="give the copied constraints parameters of their own (see write_policies)",
    )
    parser.add_argument("--engine", default=None, help="CEL engine of the server (default: celkeeper's)")
    parser.add_argument(
        "--ceiling-only", action="store_true", help="measure only the serving stack (no constraint matches)"
    )
    parser.add_argument(
        "--python-client", action="store_true", help="use the Python client even if wrk exists"
    )
    parser.add_argument(
        "--client-cpus",
        default="",
        metavar="LIST",
        help="run wrk on these CPUs only (taskset -c LIST, e.g. 1)",
    )
    parser.add_argument(
        "--baseline", metavar="DIR", default=None, help="also measure the celkeeper of this checkout"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, metavar="N", help="with --baseline: alternations (default 1)"
    )
    args = parser.parse_args()
    trees = [("this", ROOT)]
    if args.baseline:
        trees.append(("baseline", Path(args.baseline).resolve()))
    figures: dict[tuple[int, str, str], list[float]] = {}  # (workers, mode, tree) -> CPU per review

    wrk = None if args.python_client else shutil.which("wrk")
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    if wrk:
        version = subprocess.run(
            [wrk, "--version"], capture_output=True, text=True, check=False
        ).stdout.splitlines()[0]
        pinned = f", on CPU(s) {args.client_cpus}" if args.client_cpus else ""
        print(f"load generator: {version.split(' Copyright')[0]} ({wrk}), {args.threads} thread(s){pinned}")
    else:
        print("load generator: Python threads (wrk not found; `apt-get install -y wrk` for a lighter client)")
    try:
        import gunicorn_h1c  # noqa: F401  (Gunicorn >= 25 parses HTTP with it when installed)

        print("HTTP parser: gunicorn_h1c (C)")
    except ImportError:
        print("HTTP parser: Gunicorn's pure Python parser (gunicorn-h1c is not installed)")

    with tempfile.TemporaryDirectory(prefix="celkeeper-bench-") as tmp:
        work = Path(tmp)
        names = write_policies(work / "policies", distinct=args.distinct_params)
        write_policies(work / "policies-retargeted", retarget=True)
        write_namespaces(work / "namespaces.yaml")
        body = json.dumps(review(bench_pod(), uid="bench-0001")).encode()
        body_file = work / "review.json"
        body_file.write_bytes(body)
        denied_body = json.dumps(review(denied_pod(), uid="bench-0002")).encode()
        denied_file = work / "review-denied.json"
        denied_file.write_bytes(denied_body)
        print(
            f"workload: Pod AdmissionReview of {len(body)} bytes, {len(names)} constraints selecting Pods "
            f"({len({n.split('-copy')[0] for n in names})} distinct constraints, copies with "
            f"{'parameters of their own' if args.distinct_params else 'the same parameters'})"
        )
        open_rate = f"{args.open_rate:.0f}/s" if args.open_rate else "half the closed-loop rate"
        print(
            f"closed loop: {args.connections} connections for {args.duration} s; "
            f"open loop: {open_rate} for {args.duration} s; "
            f"server --max-requests {args.max_requests}; {args.repeat} measurement(s) per server"
        )
        load = os.getloadavg()
        print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (the machine may be shared)")
        print()
        header = (
            f"{'workers':>7} {'mode':<22} {'reviews/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} "
            f"{'server CPU/review':>18} {'client CPU/review':>18} {'runq wait/review':>17}  split"
        )
        print(header)
        print("-" * len(header))
        runs = [] if args.ceiling_only else [(w, "policies") for w in args.workers]
        runs.append((max(args.workers), "policies-retargeted"))
        engine = ["--engine", args.engine] if args.engine else []
        rounds = range(args.rounds if args.baseline else 1)
        plan = [(workers, policies, tree) for workers, policies in runs for _ in rounds for tree in trees]
        for workers, policies, (tree_name, tree) in plan:
            ceiling = policies != "policies"
            server = ServeProcess(
                work / f"w{workers}-{policies}",
                work / policies,
                workers=workers,
                args=[*folder_serve_args(work, args.max_requests), *engine],
                root=tree,
                threads=args.loops,
            )
            server.start()
            try:
                status, answer = server.admit(json.loads(body))
                response = answer["response"]
                if status != 200 or not response["allowed"]:
                    raise SystemExit(f"bench: the review is not allowed: {answer}")
                if not ceiling:
                    status, answer = server.admit(json.loads(denied_body))
                    if status != 200 or answer["response"]["allowed"]:
                        raise SystemExit(f"bench: the denied review is allowed: {answer}")
                    denials = len(answer["response"]["status"]["message"].splitlines())
                pids = server.worker_pids()
                rss_before = rss_mib(pids)

                def measure(
                    rate: float | None,
                    conns: int,
                    server: ServeProcess = server,
                    pids: set[int] = pids,
                    body_file: Path = body_file,
                    body: bytes = body,
                ) -> Result:
                    if wrk:
                        return run_wrk(
                            server.url("/v1/admit"),
                            body_file,
                            work,
                            args.duration,
                            conns,
                            args.threads,
                            rate,
                            pids,
                            args.client_cpus,
                        )
                    return run_python(
                        "localhost", server.port, body, server.certs.ca_cert, args.duration, conns, rate, pids
                    )

                warm = measure(None, args.connections)  # warm up: connections, caches, CPU frequency
                rows: list[tuple[str, Result]] = []
                for _ in range(args.repeat):
                    closed = measure(None, args.connections)
                    if ceiling:
                        rows.append(("no constraint matches", closed))
                        continue
                    rows.append((f"closed, {args.connections} conns", closed))
                    rate = args.open_rate or closed.rate / 2
                    rows.append((f"open at {rate:.0f}/s", measure(rate, args.connections)))
                    denied = measure(None, args.connections, body_file=denied_file, body=denied_body)
                    rows.append((f"denied ({denials}), closed", denied))
                served = warm.requests + sum(r.requests for _, r in rows)
                rss_growth = (rss_mib(pids) - rss_before, served)
                for mode, res in rows:
                    per = res.requests or 1
                    figures.setdefault((workers, mode.split(" at ")[0].split(" (")[0], tree_name), []).append(
                        res.server_cpu / per
                    )
                    label = f"{mode} [{tree_name}]" if len(trees) > 1 else mode
                    main_wait, other_wait = (w / per * 1e6 for w in res.server_wait)
                    print(
                        f"{workers:>7} {label:<22} {res.rate:>10.0f} {res.p50 * 1e3:>8.2f} "
                        f"{res.p99 * 1e3:>8.2f} {res.errors:>6} {res.server_cpu / per * 1e6:>15.0f} µs "
                        f"{res.client_cpu / per * 1e6:>15.0f} µs {main_wait:>6.0f}+{other_wait:<5.0f} µs  "
                        f"{worker_split(res.worker_cpu)}"
                    )
                growth, served = rss_growth
                per_review = growth * 2**20 / max(served, 1)
                print(
                    f"{'':>7} workers' memory: {rss_before:.0f} MiB after start, {growth:+.1f} MiB after "
                    f"~{served} reviews ({per_review:+.0f} B/review, allocator warm-up included)"
                )
            finally:
                server.stop()
        if len(trees) > 1:
            print()
            base_dir = trees[1][1]
            print(f"server CPU per review, this tree / baseline ({base_dir}), mean of {len(rounds)} round(s)")
            for (workers, mode, tree_name), ours in figures.items():
                base = figures.get((workers, mode, "baseline"))
                if tree_name != "this" or not base:
                    continue
                mine, theirs = sum(ours) / len(ours), sum(base) / len(base)
                both = f"{mine * 1e6:>8.0f} µs / {theirs * 1e6:>6.0f} µs"
                print(f"{workers:>7} {mode:<22} {both} = {mine / theirs:.2f}")
        print()
        print("server CPU per review, denied / allowed (closed loop, same server), mean of the measurements")
        for (workers, mode, tree_name), denied_cpu in sorted(figures.items()):
            allowed_cpu = figures.get((workers, f"closed, {args.connections} conns", tree_name))
            if mode != "denied" or not allowed_cpu:
                continue
            mine, theirs = sum(denied_cpu) / len(denied_cpu), sum(allowed_cpu) / len(allowed_cpu)
            print(
                f"{workers:>7} [{tree_name}] {mine * 1e6:>8.0f} µs / {theirs * 1e6:>6.0f} µs "
                f"= {mine / theirs:.2f}"
            )
        print()
        print(
            "targets (2 cores): >= 2000 reviews/s with 2 workers; p99 <= 10 ms at half that rate; a denied "
            "review <= 1.3x the server CPU of an allowed one"
        )
        print(
            "server CPU/review: worker CPU time (user+sys) divided by reviews; client likewise for the "
            "load generator, which shares the same CPUs"
        )
        print(
            "runq wait/review: time the workers' main threads + their other threads were runnable but "
            "waiting for a CPU, divided by reviews"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
