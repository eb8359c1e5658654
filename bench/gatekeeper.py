#!/usr/bin/env python3
"""celkeeper's webhook pod and Gatekeeper v3.23.1's side by side, in one run, on the same policies.

One control plane (tests/support: kube-apiserver and etcd) holds both installs: Gatekeeper's CRDs and
its manager (built from Go modules by hack/gatekeeper/build.sh, the build tests/e2e/gatekeeper uses)
run out of cluster with `--operation=webhook` as its webhook pods run it; celkeeper's CRDs and
`celkeeper serve --source kubernetes` (the webhook pod's RBAC, its default process model) as its pods
run it. Both get the 12
templates and 20 Pod constraints of bench/webhook.py (celkeeper's API groups for celkeeper, Gatekeeper's
for Gatekeeper) and the namespace they check, through the API. Then, each server loaded alone (the
other idle), alternating `--rounds` times, with wrk (8 connections, closed loop):

  - an allowed Pod review and a denied one (4 constraints): reviews/s, and the CPU time per review of
    every process of the server (user + system, /proc): Gatekeeper's manager; celkeeper's master,
    informer and workers. Their ratio is the reviews/s per core of one against the other;
  - celkeeper in an open loop at half its own saturation rate: p50 and p99;

and, once each has answered `--reviews` reviews (50,000 by default; allowed and denied as sent), the
proportional set size (PSS, /proc/<pid>/smaps_rollup) of each process of each server: the pod's memory.
Issue 29's bars are printed beside the figures. `--baseline DIR` also runs another checkout's celkeeper
(e.g. `git archive main | tar -x -C DIR`, its native library built) in the same run, the same way;
`--env NAME:VAR=VALUE,...` this tree with those environment variables (e.g. `procs2:GOMAXPROCS=2`).

    .venv/bin/python bench/gatekeeper.py [--duration 10] [--rounds 3] [--reviews 50000] [--baseline DIR]
        [--env NAME:VAR=VALUE,...]

Needs root only for nothing; needs Go (Gatekeeper's manager), the kube binaries (hack/kube/build.sh) and
wrk (`apt-get install -y wrk`). About 10 minutes (plus the manager's build when
`hack/gatekeeper/build.sh` has not made it yet).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.support.load import Result, run_wrk, tree  # noqa: E402
from bench.support.variants import add_env_option, env_variant  # noqa: E402
from bench.webhook import NAMESPACE, bench_pod, denied_pod, write_policies  # noqa: E402
from celkeeper.documents import parse_documents  # noqa: E402
from celkeeper.tls import write_certificates  # noqa: E402
from tests.incluster.support import KubeServe, deployment_setting  # noqa: E402
from tests.support.apiserver import ControlPlane  # noqa: E402
from tests.support.gatekeeper import BUILD_SCRIPT, GatekeeperUnavailable, find_manager, install_crds  # noqa: E402
from tests.support.gatekeeper_src import VERSION  # noqa: E402
from tests.support.processes import ManagedProcess, free_port  # noqa: E402
from tests.support.serve import review  # noqa: E402

GK_NAMESPACE = "gatekeeper-system"
GK_POD = "gatekeeper-bench"
CONNECTIONS = 8


# -- processes and their figures -------------------------------------------------------------------------


def pss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def describe(pid: int) -> str:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    text = " ".join(a.decode(errors="replace") for a in argv[:4])
    return text[:60]


@dataclass
class Server:
    name: str
    url: str
    root_pid: int
    served: int = 0
    cpu: dict[str, list[float]] = field(default_factory=dict)  # mode -> CPU seconds per review, per round
    rate: dict[str, list[float]] = field(default_factory=dict)
    latency: list[Result] = field(default_factory=list)  # the open-loop runs

    def pids(self) -> set[int]:
        return tree(self.root_pid)

    def record(self, mode: str, result: Result) -> None:
        self.served += result.requests
        if result.requests:
            self.cpu.setdefault(mode, []).append(result.server_cpu / result.requests)
            self.rate.setdefault(mode, []).append(result.rate)


# -- Gatekeeper ------------------------------------------------------------------------------------------


def gatekeeper_manager() -> Path:
    """Gatekeeper's manager, built (or found up to date) by hack/gatekeeper/build.sh."""
    try:
        return find_manager()
    except GatekeeperUnavailable:
        done = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"bench: cannot build Gatekeeper's manager:\n{done.stderr[-2000:]}") from None
        return find_manager()


def as_gatekeeper(text: str) -> str:
    return text.replace("templates.celkeeper.io/", "templates.gatekeeper.sh/").replace(
        "constraints.celkeeper.io/", "constraints.gatekeeper.sh/"
    )


def policy_objects(folder: Path, gatekeeper: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The templates and the constraints of a policy folder (bench/webhook.py's), as API objects."""
    templates: list[dict[str, Any]] = []
    constraints: list[dict[str, Any]] = []
    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".yaml", ".json"):
            continue
        text = as_gatekeeper(path.read_text()) if gatekeeper else path.read_text()
        for doc in parse_documents(text, str(path)).documents:
            obj = json.loads(json.dumps(doc.data))
            (templates if obj["kind"] == "ConstraintTemplate" else constraints).append(obj)
    unique = {t["metadata"]["name"]: t for t in templates}
    return list(unique.values()), constraints


def apply_policies(cluster: ControlPlane, folder: Path, gatekeeper: bool) -> None:
    """Templates first; their constraint CRDs are made by the server (Gatekeeper's or celkeeper's); then
    the constraints."""
    templates, constraints = policy_objects(folder, gatekeeper)
    cluster.kubectl("apply", "-f", "-", input=templates)
    group = "constraints.gatekeeper.sh" if gatekeeper else "constraints.celkeeper.io"
    for template in templates:
        kind = template["spec"]["crd"]["spec"]["names"]["kind"]
        crd = f"crd/{kind.lower()}.{group}"
        deadline = time.monotonic() + 120
        while cluster.kubectl("get", crd, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: {crd} was not made")
            time.sleep(0.5)
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", crd)
    deadline = time.monotonic() + 120
    while True:  # a new constraint kind may take a moment to be served
        done = cluster.kubectl("apply", "-f", "-", input=constraints, check=False)
        if done.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: constraints not applied: {done.stderr}")
        time.sleep(1)


def start_gatekeeper(
    cluster: ControlPlane, manager: Path, work: Path, operation: str = "webhook"
) -> tuple[ManagedProcess, int]:
    """Gatekeeper's manager as its webhook pods run it (`webhook`), or as its audit pod does (`generate`,
    with `audit`: the one that makes each template's constraint CRD, which the webhook pods do not)."""
    pod = f"{GK_POD}-{operation}"
    gk_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod, "namespace": GK_NAMESPACE},
        "spec": {"containers": [{"name": "manager", "image": "gatekeeper"}]},
    }
    # Gatekeeper owns its status objects by its Pod (pkg/util/pod.go): the Pod it runs as (never
    # scheduled: this control plane has no node)
    cluster.kubectl("apply", "-f", "-", input=gk_pod)
    certs = write_certificates(work / f"gk-certs-{operation}", ["localhost"], ["127.0.0.1"])
    cert_dir = work / f"gk-cert-dir-{operation}"
    cert_dir.mkdir()
    shutil.copy(certs.cert, cert_dir / "tls.crt")
    shutil.copy(certs.key, cert_dir / "tls.key")
    port, health = free_port(), free_port()
    operations = (
        ["--operation=webhook"] if operation == "webhook" else ["--operation=audit", "--operation=generate"]
    )
    argv = [
        str(manager),
        *operations,
        f"--port={port}",
        "--host=127.0.0.1",
        f"--cert-dir={cert_dir}",
        "--disable-cert-rotation",
        f"--health-addr=127.0.0.1:{health}",
        "--metrics-addr=0",
        f"--prometheus-port={free_port()}",  # Gatekeeper's own metrics (8888 by default: one process only)
        "--log-level=ERROR",
        f"--exempt-namespace={GK_NAMESPACE}",
        "--disable-opa-builtin={http.send}",
    ]
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig_path),
        "POD_NAME": pod,
        "POD_NAMESPACE": GK_NAMESPACE,
        "NAMESPACE": GK_NAMESPACE,
        "CONTAINER_NAME": "manager",
    }
    process = ManagedProcess(f"gatekeeper-{operation}", argv, work / f"gatekeeper-{operation}.log", env=env)
    process.start()
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=2) as answer:
                if answer.status == 200:
                    return process, port
        except OSError:
            pass
        if not process.running() or time.monotonic() > deadline:
            raise SystemExit(f"bench: Gatekeeper did not become ready:\n{process.log_tail(40)}")
        time.sleep(0.5)


def wait_decides(url: str, ca: Path, body: bytes, denials: int = 0, timeout: float = 180) -> int:
    """Until the server denies `body` with `denials` messages (0: as many, three times running), every
    constraint loaded; the number of messages."""
    import requests

    deadline = time.monotonic() + timeout
    last: Any = None
    seen: list[int] = []
    while time.monotonic() < deadline:
        try:
            headers = {"Content-Type": "application/json"}
            posted = requests.post(url, data=body, headers=headers, verify=str(ca), timeout=10)
            answer = posted.json()["response"]
            last = answer
            message = (answer.get("status") or {}).get("message", "")
            count = 0 if answer["allowed"] else len(message.splitlines())
            seen.append(count)
            if count and (count == denials or (not denials and seen[-3:] == [count] * 3)):
                return count
        except (OSError, ValueError, KeyError) as err:
            last = err
        time.sleep(1)
    raise SystemExit(f"bench: {url} does not deny with {denials or 'a stable number of'} messages: {last}")


# -- main ------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=int, default=10, help="seconds per measurement (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the servers (default 3)")
    parser.add_argument(
        "--reviews", type=int, default=50_000, help="reviews before memory is read (default 50000)"
    )
    parser.add_argument("--baseline", metavar="DIR", help="also measure the celkeeper of this checkout")
    add_env_option(parser)
    parser.add_argument(
        "--workers", type=int, default=1, help="celkeeper's --workers (default 1, its default)"
    )
    parser.add_argument(
        "--threads", type=int, default=2, help="celkeeper's --threads (default 2, its default)"
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("bench: needs wrk (apt-get install -y wrk)")
    manager = gatekeeper_manager()
    print(f"machine: {os.cpu_count()} CPUs; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"Gatekeeper {VERSION} manager: {manager}")
    with tempfile.TemporaryDirectory(prefix="celkeeper-bench-gk-") as tmp:
        work = Path(os.environ.get("CELKEEPER_BENCH_WORK") or tmp)
        policies = work / "policies"
        write_policies(policies)
        allowed = json.dumps(review(bench_pod(), uid="bench-0001")).encode()
        denied = json.dumps(review(denied_pod(), uid="bench-0002")).encode()
        (work / "allowed.json").write_bytes(allowed)
        (work / "denied.json").write_bytes(denied)
        with ControlPlane(work / "cluster") as cluster:
            install_crds(cluster)
            cluster.kubectl("create", "namespace", GK_NAMESPACE)
            namespace = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": NAMESPACE, "labels": {"security.example.com/profile": "restricted"}},
            }
            cluster.kubectl("apply", "-f", "-", input=namespace)
            servers: list[Server] = []
            stops: list[Any] = []
            try:
                gk, gk_port = start_gatekeeper(cluster, manager, work)
                stops.append(gk.stop)
                generator, _ = start_gatekeeper(cluster, manager, work, "generate")
                apply_policies(cluster, policies, gatekeeper=True)
                generator.stop()  # the CRDs are made: the webhook pod is measured alone
                gk_url = f"https://localhost:{gk_port}/v1/admit"
                gk_ca = work / "gk-certs-webhook" / "ca.crt"
                # (name, tree, environment): a baseline runs with the same process model
                trees: list[tuple[str, Path, dict[str, str]]] = [("celkeeper", ROOT, {})]
                if args.baseline:
                    trees.append(("celkeeper (baseline)", Path(args.baseline).resolve(), {}))
                for variant, env in map(env_variant, args.env):
                    trees.append((f"celkeeper ({variant})", ROOT, env))
                celkeepers = []
                for i, (name, tree_root, env) in enumerate(trees):
                    pod_namespace, kubeconfig = deployment_setting(cluster, f"ck{i}")
                    serve = KubeServe(
                        work / f"ck{i}",
                        kubeconfig,
                        f"celkeeper-bench-{i}",
                        pod_namespace,
                        workers=args.workers,
                        threads=args.threads,
                        args=["--log-level", "warning", "--max-requests", "0"],
                        root=tree_root,
                        env=env,
                    )
                    serve.start(timeout=180, wait_ready=False)
                    stops.append(serve.stop)
                    celkeepers.append((name, serve))
                apply_policies(cluster, policies, gatekeeper=False)
                expected = 0
                for name, serve in celkeepers:
                    serve.wait_ready(180)
                    expected = wait_decides(serve.url("/v1/admit"), serve.certs.ca_cert, denied, expected)
                    assert serve.process is not None
                    servers.append(Server(name, serve.url("/v1/admit"), serve.process.pid))
                wait_decides(gk_url, gk_ca, denied, expected)
                servers.insert(0, Server(f"Gatekeeper {VERSION}", gk_url, gk.pid))
                print(f"both deny the denied Pod with {expected} messages; both allow the other")
                measure(servers, work, args)
            finally:
                for stop in reversed(stops):
                    stop()
    return 0


def measure(servers: list[Server], work: Path, args: argparse.Namespace) -> None:
    allowed, denied = work / "allowed.json", work / "denied.json"
    ours = [s for s in servers if not s.name.startswith("Gatekeeper")]

    def load(server: Server, body: Path, duration: int, rate: float | None = None) -> Result:
        return run_wrk(server.url, body, work, duration, CONNECTIONS, 1, rate, server.pids())

    for server in servers:  # warm up: connections, caches, CPU frequency
        server.record("warm-up", load(server, allowed, 3))
    for round_ in range(args.rounds):
        for server in servers:
            server.record("allowed", load(server, allowed, args.duration))
            server.record("denied", load(server, denied, args.duration))
        for server in ours:
            half = statistics.median(server.rate["allowed"]) / 2
            result = load(server, allowed, args.duration, half)
            server.record("open", result)
            server.latency.append(result)
        print(f"round {round_ + 1} of {args.rounds} done; load average {os.getloadavg()[0]:.2f}", flush=True)
    for server in servers:  # up to the reviews the memory is read after
        while server.served < args.reviews:
            left = args.reviews - server.served
            per_second = max(statistics.median(server.rate["allowed"]), 1.0)
            seconds = max(2, min(60, int(left / per_second) + 1))
            server.record("top-up", load(server, allowed if server.served % 2 else denied, seconds))
    report(servers, args)


def report(servers: list[Server], args: argparse.Namespace) -> None:
    gk = servers[0]
    print()
    print(
        f"each mode: wrk, {CONNECTIONS} connections, {args.duration} s, {args.rounds} round(s), "
        "the servers alternated"
    )
    print(f"{'server':<26} {'mode':<9} {'reviews/s':>18} {'CPU per review':>22} {'vs Gatekeeper':>14}")
    for server in servers:
        for mode in ("allowed", "denied"):
            rates, cpus = server.rate[mode], server.cpu[mode]
            cpu = statistics.median(cpus)
            ratio = statistics.median(gk.cpu[mode]) / cpu
            spread = f"{min(rates):,.0f}-{max(rates):,.0f}"
            cpu_text = f"{min(cpus) * 1e6:,.0f}-{max(cpus) * 1e6:,.0f} us"
            print(f"{server.name:<26} {mode:<9} {spread:>18} {cpu_text:>22} {ratio:>13.2f}x")
    for server in servers[1:]:
        for result in server.latency:
            half = f"open loop at {result.rate:,.0f}/s (half its saturation)"
            print(f"{server.name:<26} {half}: {result.open_loop()}")
    print()
    print(f"memory after {args.reviews:,} reviews or more each (PSS, /proc/<pid>/smaps_rollup)")
    totals = {}
    for server in servers:
        pids = sorted(server.pids())
        total = 0.0
        for pid in pids:
            pss = pss_mib(pid)
            total += pss
            print(f"  {server.name:<26} {pid:>7} {pss:7.1f} MiB  {describe(pid)}")
        totals[server.name] = total
        print(
            f"  {server.name:<26} {'total':>7} {total:7.1f} MiB after {server.served:,} reviews "
            f"({len(pids)} processes)"
        )
    print()
    print("bars (issue 29):")
    for server in servers[1:]:
        total = totals[server.name]
        print(
            f"  {server.name}: pod memory {total:.0f} MiB PSS (<= 200), "
            f"{total / totals[gk.name]:.2f}x Gatekeeper's (<= 1.6)"
        )
        for mode in ("allowed", "denied"):
            share = statistics.median(server.cpu[mode]) / statistics.median(gk.cpu[mode])
            print(
                f"  {server.name}: {mode} server CPU per review {share:.3f} of Gatekeeper's "
                "(<= 0.125: >= 8x per core)"
            )
        worst = max(result.p99 for result in server.latency)
        print(f"  {server.name}: p99 at half its saturation rate {worst * 1e3:.2f} ms, worst round (<= 5 ms)")


if __name__ == "__main__":
    raise SystemExit(main())
