#!/usr/bin/env python3
"""celkeeper's mutating webhook and Gatekeeper v3.23.1's, side by side in one run, on the same mutators.

One control plane (tests/support) holds both: Gatekeeper's CRDs and its manager (hack/gatekeeper/build.sh,
the build tests/e2e/gatekeeper uses) out of cluster with `--operation=mutation-webhook`, as its mutation
webhook runs; celkeeper's CRDs and `celkeeper serve --source kubernetes` (the webhook pod's RBAC, its
default process model) as its pods run. Ten mutators (Assign with list globs, AssignMetadata, ModifySet,
AssignImage), created once with kubectl, all match and change bench/webhook.py's Pod (~4.7 KB review).
Both must answer the identical JSONPatch (operations compared as a set: Gatekeeper's come in Go's random
map order) before anything is measured. Then, each server loaded alone, alternating `--rounds` times:

  - wrk, 8 connections, closed loop: mutating reviews/s and the CPU time per review of every process of
    the server (/proc); their ratio is reviews/s per core of one against the other;
  - each in an open loop at half celkeeper's saturation rate: p50 and p99;

and the PSS of each server's processes after the run. Issue 25's bars are printed beside the figures.

    .venv/bin/python bench/mutation.py [--duration 10] [--rounds 3]

Needs Go (Gatekeeper's manager), the kube binaries (hack/kube/build.sh) and wrk.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.gatekeeper import CONNECTIONS, Server, describe, gatekeeper_manager, pss_mib  # noqa: E402
from bench.support.load import Result, run_wrk  # noqa: E402
from bench.webhook import NAMESPACE, bench_pod  # noqa: E402
from tests.incluster.support import KubeServe, deployment_setting  # noqa: E402
from tests.support.apiserver import ControlPlane  # noqa: E402
from tests.support.gatekeeper import GatekeeperManager, install_crds  # noqa: E402
from tests.support.gatekeeper_src import VERSION  # noqa: E402
from tests.support.serve import review  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

POD = [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]


def mutators() -> list[dict[str, Any]]:
    """Ten mutators, every one matching and changing bench_pod()."""

    def assign(name: str, location: str, value: Any) -> dict[str, Any]:
        spec = {"applyTo": POD, "location": location, "parameters": {"assign": {"value": value}}}
        return {
            "apiVersion": "mutations.gatekeeper.sh/v1",
            "kind": "Assign",
            "metadata": {"name": name},
            "spec": spec,
        }

    def metadata(name: str, location: str, value: str) -> dict[str, Any]:
        spec = {"location": location, "parameters": {"assign": {"value": value}}}
        return {
            "apiVersion": "mutations.gatekeeper.sh/v1",
            "kind": "AssignMetadata",
            "metadata": {"name": name},
            "spec": spec,
        }

    def modify(name: str, location: str, values: list[Any]) -> dict[str, Any]:
        spec = {
            "applyTo": POD,
            "location": location,
            "parameters": {"operation": "merge", "values": {"fromList": values}},
        }
        return {
            "apiVersion": "mutations.gatekeeper.sh/v1",
            "kind": "ModifySet",
            "metadata": {"name": name},
            "spec": spec,
        }

    toleration = {"key": "dedicated", "operator": "Equal", "value": "shop", "effect": "NoSchedule"}
    return [
        assign("pull-always", "spec.containers[name:*].imagePullPolicy", "Always"),
        assign("read-only-root", "spec.containers[name:*].securityContext.readOnlyRootFilesystem", True),
        assign("ephemeral-limit", "spec.containers[name:*].resources.limits.ephemeral-storage", "1Gi"),
        assign("priority-class", "spec.priorityClassName", "standard"),
        assign("no-token", "spec.automountServiceAccountToken", False),
        metadata("mutated-label", "metadata.labels.mutated", "yes"),
        metadata("checked-annotation", "metadata.annotations.checked", "true"),
        modify("json-logs", "spec.containers[name:*].args", ["--log-format=json"]),
        modify("dedicated", "spec.tolerations", [toleration]),
        {
            "apiVersion": "mutations.gatekeeper.sh/v1alpha1",
            "kind": "AssignImage",
            "metadata": {"name": "mirror"},
            "spec": {
                "applyTo": POD,
                "location": "spec.containers[name:*].image",
                "parameters": {"assignDomain": "mirror.example.com"},
            },
        },
    ]


def patch_of(url: str, ca: Path, body: bytes) -> list[str] | None:
    """The JSONPatch a server answers, its operations as sorted JSON (None when it does not patch)."""
    import requests

    answer = requests.post(
        url, data=body, headers={"Content-Type": "application/json"}, verify=str(ca), timeout=10
    )
    response = answer.json()["response"]
    if "patch" not in response:
        return None
    return sorted(json.dumps(op, sort_keys=True) for op in json.loads(base64.b64decode(response["patch"])))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=int, default=10, help="seconds per measurement (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the servers (default 3)")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("bench: needs wrk (apt-get install -y wrk)")
    manager_binary = gatekeeper_manager()
    print(f"machine: {os.cpu_count()} CPUs; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="celkeeper-bench-mut-") as tmp:
        work = Path(os.environ.get("CELKEEPER_BENCH_WORK") or tmp)
        body = json.dumps(review(bench_pod(), uid="bench-mutate")).encode()
        (work / "review.json").write_bytes(body)
        with ControlPlane(work / "cluster") as cluster:
            install_crds(cluster)  # Gatekeeper's, mutators' among them
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
            cluster.kubectl("apply", "-f", "-", input=namespace)
            gk = GatekeeperManager(
                manager_binary,
                cluster,
                work / "gatekeeper",
                ["--operation=mutation-webhook", "--log-level=ERROR"],
            )
            (work / "gatekeeper").mkdir(exist_ok=True)
            gk.start()
            gk_ca = work / "gatekeeper-ca.crt"
            gk_ca.write_bytes(gk.ca_pem)
            pod_namespace, kubeconfig = deployment_setting(cluster, "ckmut")
            serve = KubeServe(
                work / "celkeeper",
                kubeconfig,
                "celkeeper-bench-mut",
                pod_namespace,
                workers=1,
                threads=2,
                args=["--log-level", "warning", "--max-requests", "0"],
            )
            try:
                serve.start(timeout=180)
                cluster.kubectl("create", "-f", "-", input=mutators())
                gk.wait_mutators({(m["kind"], m["metadata"]["name"]): 1 for m in mutators()})
                ck_url = serve.url("/v1/mutate")

                def same() -> list[str] | None:
                    theirs = patch_of(gk.url, gk_ca, body)
                    ours = patch_of(ck_url, serve.certs.ca_cert, body)
                    return theirs if theirs is not None and theirs == ours and len(theirs) >= 10 else None

                patch = wait_for(same, timeout=120, interval=1, what="both servers to answer the same patch")
                print(
                    f"both answer the same JSONPatch: {len(patch)} operations on a {len(body):,}-byte review"
                )
                assert serve.process is not None and gk.process.pid is not None
                servers = [
                    Server(f"Gatekeeper {VERSION}", gk.url, gk.process.pid),
                    Server("celkeeper", ck_url, serve.process.pid),
                ]
                measure(servers, work, args)
            finally:
                serve.stop()
                gk.stop()
    return 0


def measure(servers: list[Server], work: Path, args: argparse.Namespace) -> None:
    body = work / "review.json"

    def load(server: Server, duration: int, rate: float | None = None) -> Result:
        return run_wrk(server.url, body, work, duration, CONNECTIONS, 1, rate, server.pids())

    gk, ours = servers
    for server in servers:
        server.record("warm-up", load(server, 3))
    for round_ in range(args.rounds):
        for server in servers:
            server.record("mutate", load(server, args.duration))
        half = statistics.median(ours.rate["mutate"]) / 2
        for server in servers:
            result = load(server, args.duration, half)
            server.record("open", result)
            server.latency.append(result)
        print(f"round {round_ + 1} of {args.rounds} done; load average {os.getloadavg()[0]:.2f}", flush=True)
    print()
    print(
        f"wrk, {CONNECTIONS} connections, {args.duration} s, {args.rounds} round(s), the servers alternated"
    )
    print(f"{'server':<22} {'reviews/s':>16} {'CPU per review':>20} {'per core vs Gatekeeper':>24}")
    gk_cpu = statistics.median(gk.cpu["mutate"])
    for server in servers:
        rates, cpus = server.rate["mutate"], server.cpu["mutate"]
        ratio = gk_cpu / statistics.median(cpus)
        print(
            f"{server.name:<22} {min(rates):>7,.0f}-{max(rates):<7,.0f} "
            f"{min(cpus) * 1e6:>8,.0f}-{max(cpus) * 1e6:<8,.0f}us {ratio:>20.2f}x"
        )
    for server in servers:
        for result in server.latency:
            print(f"{server.name:<22} open loop at {result.rate:,.0f}/s: {result.open_loop()}")
    print()
    for server in servers:
        pids = sorted(server.pids())
        total = sum(pss_mib(pid) for pid in pids)
        for pid in pids:
            print(f"  {server.name:<22} {pid:>7} {pss_mib(pid):7.1f} MiB  {describe(pid)}")
        print(f"  {server.name:<22} {'total':>7} {total:7.1f} MiB PSS after {server.served:,} reviews")
    per_core = gk_cpu / statistics.median(ours.cpu["mutate"])
    worst_p99 = max(result.p99 for result in ours.latency)
    print()
    print(
        f"bar: >= 3x Gatekeeper's mutating reviews per core: {per_core:.2f}x "
        f"{'met' if per_core >= 3 else 'NOT met'}"
    )
    print(
        f"bar: p99 <= 5 ms at half celkeeper's saturation: worst {worst_p99 * 1e3:.2f} ms "
        f"{'met' if worst_p99 <= 0.005 else 'NOT met'}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
