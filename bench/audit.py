"""Audit cost: Pods listed through a real kube-apiserver and evaluated against bench/decision.py's 20
constraints (five templates, each constraint matching Pods), in process and as a whole run.

Prints, for --pods Pods (~6 KB each as the API server lists them, managedFields included; 10% of them
violate two constraints):
  - the evaluation alone, in process (the Pods as listed, already parsed): objects/s, best of 3 passes;
  - listing them in pages of 500 through the API server and parsing them, in process: objects/s;
  - a whole run of the real `celkeeper audit --source kubernetes --once` process: the run's own duration
    (its audit_finished line), the process's wall time (start-up and template compilation included),
    and its peak RSS;
  - what the OpenReports cost: runs without them (`--reports none`), writing all of them (the reports
    deleted before the run) and finding them unchanged (it writes none), alternated `--report-rounds`
    times: each run's duration, CPU, peak RSS (VmHWM), peak anonymous memory and peak PSS (sampled), and
    the differences with the run without reports of the same round;
  - with --large N (e.g. 50000): the same run after growing the cluster to N Pods, and the peak RSS
    growth of the process over a run that lists no Pods (`--excluded-resource pods`): memory must not
    grow with the cluster.
Targets (2 cores): >= 5,000 objects/s evaluated in process; a run over 10,000 Pods <= 10 s; peak RSS
growth <= 100 MiB at 50,000 Pods. Needs the binaries from hack/kube/build.sh (skips otherwise).

With --baseline DIR (another checkout with its built venv, DIR/.venv, e.g. main's), its code is
measured in the same run on the same Pods, interleaved with this one's: the evaluation alone (in a
process of its own, on the same listed Pods) and the whole `celkeeper audit --once` run.

    .venv/bin/python bench/audit.py [--pods 10000] [--large 50000] [--engine cel-go|cel-python]
                                    [--baseline DIR] [--report-rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from celkeeper.settings import DEFAULT_ENGINE, ENGINES  # noqa: E402
from tests.support.binaries import BinariesUnavailable, find_binaries  # noqa: E402

NAMESPACES = 10
VIOLATING_EVERY = 10  # one Pod in ten lacks the labels two of the constraints require
CELKEEPER = Path(sys.executable).parent / "celkeeper"


def pods(start: int, stop: int) -> Any:
    from tests.support.pods import realistic_pod

    for i in range(start, stop):
        labels = {} if i % VIOLATING_EVERY == 0 else {"team5": "a", "team15": "b"}
        yield realistic_pod(f"web-{i:06d}", f"team-{i % NAMESPACES}", labels=labels)


def cluster_policies() -> list[dict[str, Any]]:
    """decision.py's templates and 20 Pod constraints, in celkeeper's API groups."""
    import decision

    out = []
    for kind, spec in decision.TEMPLATES.items():
        template = json.loads(json.dumps(decision.template(kind, spec).data))
        template["apiVersion"] = "templates.celkeeper.io/v1"
        out.append(template)
    kinds = list(decision.TEMPLATES)
    for i in range(20):
        kind = kinds[i % len(kinds)]
        constraint = decision.constraint(
            kind, f"pods-{i}", "", "Pod", decision.TEMPLATES[kind]["parameters"](i)
        )
        data = json.loads(json.dumps(constraint.data))
        data["apiVersion"] = "constraints.celkeeper.io/v1beta1"
        out.append(data)
    return out


def install(cluster: Any) -> None:
    from celkeeper.crds import constraint_crd
    from tests.audit.support import install_report_crds
    from tests.incluster.support import install_crds
    from tests.support.kubectl import apply

    install_crds(cluster)
    install_report_crds(cluster)  # the audit writes its OpenReports (every violation) after each run
    policies = cluster_policies()
    templates = [p for p in policies if p["kind"] == "ConstraintTemplate"]
    for template in templates:
        apply(cluster, template)
        cluster.kubectl("apply", "-f", "-", input=constraint_crd(template))
    for template in templates:
        name = template["spec"]["crd"]["spec"]["names"]["kind"].lower()
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}.constraints.celkeeper.io")
    for constraint in (p for p in policies if p["kind"] != "ConstraintTemplate"):
        apply(cluster, constraint)


def grow(cluster: Any, start: int, stop: int) -> float:
    from tests.support.bulk import create_many

    began = time.perf_counter()
    created = create_many(cluster, pods(start, stop), threads=8)
    assert created == stop - start
    return time.perf_counter() - began


@dataclass
class Rate:
    objects: int
    wall: float
    cpu: float  # this process's CPU seconds

    def line(self) -> str:
        return (
            f"{self.objects / self.wall:8.0f} objects/s wall, {self.objects / self.cpu:8.0f} objects per "
            "CPU-second"
        )


def in_process(cluster: Any, engine: str) -> tuple[Rate, Rate, int, list[Any]]:
    """(list + parse, evaluation (best of 3 by CPU time), violations, the listed Pods)."""
    from celkeeper.kube import KubeClient, pages
    from celkeeper.kube.resources import Resource

    client = KubeClient.connect(str(cluster.kubeconfig_path))
    resource = Resource("", "v1", "pods", "Pod")
    wall, cpu = time.perf_counter(), time.process_time()
    listed = [obj for page in pages(client, resource, 500) for obj in page.items]
    listing = Rate(len(listed), time.perf_counter() - wall, time.process_time() - cpu)
    client.close()
    best, violations = evaluate_listed(listed, engine)
    return listing, best, violations, listed


# the evaluation alone, as a script: run by this process's Python on this checkout, or by a baseline's
# (argv: the checkout, the engine, a JSON file of the listed Pods; prints objects, wall, CPU, violations)
EVALUATE = """
import json, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/bench"]
import decision
from celkeeper.audit import Evaluator
from celkeeper.cel import get_engine
from celkeeper.policy import TemplateCompiler
listed = json.load(open(sys.argv[3]))
evaluator = Evaluator(decision.policy_set(TemplateCompiler(get_engine(sys.argv[2])), 20))
namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {}}}
best = None
for _ in range(3):
    wall, cpu = time.perf_counter(), time.process_time()
    violations = sum(len(evaluator.evaluate(obj, namespace).violations) for obj in listed)
    rate = (len(listed), time.perf_counter() - wall, time.process_time() - cpu, violations)
    best = rate if best is None or rate[2] < best[2] else best
print(json.dumps(best))
"""


def evaluate_listed(listed: list[Any], engine: str, checkout: Path = ROOT) -> tuple[Rate, int]:
    """The evaluation alone of the listed Pods (best of 3 by CPU time) in a process of its own, with
    `checkout`'s code and venv (this one's by default); and the violations found."""
    python = sys.executable if checkout == ROOT else str(checkout / ".venv" / "bin" / "python")
    with tempfile.NamedTemporaryFile("w", suffix=".json") as objects:
        json.dump(listed, objects)
        objects.flush()
        out = subprocess.run(
            [python, "-c", EVALUATE, str(checkout), engine, objects.name],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    count, wall, cpu, violations = json.loads(out.strip().splitlines()[-1])
    return Rate(count, wall, cpu), violations


@dataclass
class Run:
    seconds: float  # the run itself (audit_started to audit_finished)
    wall: float  # the process, start-up and template compilation included
    cpu: float  # the audit process's CPU seconds
    apiserver_cpu: float  # kube-apiserver's CPU seconds meanwhile
    peak_mib: float  # peak RSS (VmHWM: exact)
    objects: int
    violations: int
    report_writes: int = 0  # OpenReports created, updated or deleted by the run
    peak_anon_mib: float = 0.0  # peak of its anonymous (private) memory, sampled
    peak_pss_mib: float = 0.0  # peak PSS (shared pages charged in part), sampled


def memory_kib(pid: int) -> tuple[int, int]:
    """The process's peak RSS so far (VmHWM) and its anonymous memory now (RssAnon), in KiB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    found = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "RssAnon"):
            found[key] = int(value.split()[0])
    return found.get("VmHWM", 0), found.get("RssAnon", 0)


def pss_kib(pid: int) -> int:
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    for line in rollup.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def audit_process(cluster: Any, work: Path, *extra: str, celkeeper: Path = CELKEEPER) -> Run:
    """Run `celkeeper audit --once` as a process of its own (`celkeeper`: whose)."""
    from bench.support.load import cpu_seconds

    log_path = work / f"audit-{time.monotonic_ns()}.log"
    argv = [
        str(celkeeper),
        "audit",
        "--source",
        "kubernetes",
        "--kubeconfig",
        str(cluster.kubeconfig_path),
        "--once",
        "--metrics-bind",
        "",
        *extra,
    ]
    apiserver = {cluster.apiserver.pid}
    api_before = cpu_seconds(apiserver)
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    peak_kib = peak_anon_kib = peak_pss_kib = 0
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        # the peak RSS of the process's own address space (VmHWM starts afresh at exec; ru_maxrss would
        # count the pages of this big process it was forked from); its anonymous memory every 20 ms and its
        # PSS every 100 ms (smaps_rollup walks the page tables), the peaks of those samples
        samples = 0
        while proc.poll() is None:
            hwm, anon = memory_kib(proc.pid)
            peak_kib, peak_anon_kib = max(peak_kib, hwm), max(peak_anon_kib, anon)
            if samples % 5 == 0:
                peak_pss_kib = max(peak_pss_kib, pss_kib(proc.pid))
            samples += 1
            time.sleep(0.02)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter() - began
    api_cpu = cpu_seconds(apiserver) - api_before
    code = proc.returncode
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    finished = next((line for line in lines if line.get("event_type") == "audit_finished"), None)
    if code != 0 or finished is None:
        raise SystemExit(f"celkeeper audit failed ({code}):\n{log_path.read_text()[-3000:]}")
    started = next(line["ts"] for line in lines if line.get("event_type") == "audit_started")
    cpu = usage.ru_utime + usage.ru_stime - children_before.ru_utime - children_before.ru_stime
    return Run(
        finished["ts"] - started,
        wall,
        cpu,
        api_cpu,
        peak_kib / 1024,
        finished["objects"],
        finished["violations"],
        sum(finished.get(f"reports_{op}", 0) for op in ("created", "updated", "deleted")),
        peak_anon_kib / 1024,
        peak_pss_kib / 1024,
    )


def delete_reports(cluster: Any) -> None:
    """Every report the audit wrote (its next run writes them all again)."""
    for kind in ("reports.openreports.io", "clusterreports.openreports.io"):
        cluster.kubectl("delete", kind, "--all", "--all-namespaces", "--wait=true", timeout=300)


def describe(run: Run, baseline: Run) -> str:
    pods_cpu = run.cpu - baseline.cpu  # start-up, compilation and discovery are in both
    return (
        f"run {run.seconds:.2f} s ({run.objects / run.seconds:.0f} objects/s), "
        f"process wall {run.wall:.2f} s; CPU: audit {run.cpu:.2f} s ({pods_cpu:.2f} s more than a run "
        f"listing no Pods: {run.objects / max(pods_cpu, 1e-9):.0f} objects per CPU-second), "
        f"kube-apiserver {run.apiserver_cpu:.2f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=10_000, help="Pods in the cluster (default 10000)")
    parser.add_argument(
        "--large",
        type=int,
        default=0,
        metavar="N",
        help="also grow the cluster to N Pods and measure again (e.g. 50000)",
    )
    parser.add_argument("--engine", default=DEFAULT_ENGINE, choices=ENGINES)
    parser.add_argument(
        "--baseline", metavar="DIR", help="also measure this checkout (its .venv built), interleaved"
    )
    parser.add_argument(
        "--report-rounds",
        type=int,
        default=2,
        help="rounds of runs without, writing and keeping the OpenReports (default 2)",
    )
    args = parser.parse_args()
    baseline = Path(args.baseline).resolve() if args.baseline else None
    try:
        binaries = find_binaries()
    except BinariesUnavailable as exc:
        print(f"skipped: {exc}")
        return 0
    from tests.support.apiserver import ControlPlane

    with tempfile.TemporaryDirectory(prefix="celkeeper-bench-audit-") as tmp:
        work = Path(tmp)
        with ControlPlane(work / "kube", binaries) as cluster:
            for i in range(NAMESPACES):
                cluster.kubectl("create", "namespace", f"team-{i}")
            install(cluster)
            took = grow(cluster, 0, args.pods)
            print(f"{args.pods} Pods created in {took:.0f} s ({args.pods / took:.0f}/s)")
            size = len(cluster.request("/api/v1/namespaces/team-1/pods/web-000001")[1])
            print(f"one Pod as listed: {size / 1024:.1f} KB")
            listing, evaluation, violations, listed = in_process(cluster, args.engine)
            print(
                f"in process ({args.engine}), {listing.objects} Pods, 20 constraints, "
                f"{violations} violations:"
            )
            per_cpu = evaluation.objects / evaluation.cpu
            print(
                f"  evaluation alone:           {evaluation.line()}   (target >= 5000: "
                f"{'met' if per_cpu >= 5000 else 'NOT met'} per CPU-second)"
            )
            if baseline is not None:
                # interleaved: the baseline, this checkout again, the baseline again
                for who in (baseline, ROOT, baseline):
                    rate, found = evaluate_listed(listed, args.engine, who)
                    print(f"  evaluation alone, {who}: {rate.line()} ({found} violations)")
            del listed
            print(f"  list + parse, pages of 500: {listing.line()}")
            baseline_run = audit_process(cluster, work, "--excluded-resource", "pods")
            run = audit_process(cluster, work)
            print(f"celkeeper audit --once over {run.objects} objects ({run.violations} violations):")
            print(f"  {describe(run, baseline_run)}")
            print(f"  target <= 10 s at 10,000: {'met' if run.seconds <= 10 else 'NOT met'}")
            print(
                f"  peak RSS {run.peak_mib:.0f} MiB; a run listing no Pods {baseline_run.peak_mib:.0f} MiB; "
                f"growth {run.peak_mib - baseline_run.peak_mib:.0f} MiB"
            )
            # the OpenReports: the run above wrote them; an unchanged run writes none. Their memory: runs
            # without them (--reports none), writing every one of them (deleted before the run) and unchanged,
            # alternated
            print(f"  OpenReports: that run wrote {run.report_writes}")
            print(
                f"  OpenReports' cost, {args.report_rounds} rounds (peak RSS exact; anonymous memory and PSS "
                "sampled):"
            )
            modes = {"none": [], "writing": [], "unchanged": []}
            for round_ in range(args.report_rounds):
                order = list(modes) if round_ % 2 == 0 else list(reversed(modes))
                for mode in order:
                    if mode == "writing":
                        delete_reports(cluster)
                    again = audit_process(
                        cluster, work, "--reports", "none" if mode == "none" else "openreports"
                    )
                    modes[mode].append(again)
                    print(
                        f"    {mode:<9}: run {again.seconds:.2f} s, CPU {again.cpu:.2f} s, peak RSS "
                        f"{again.peak_mib:.1f} MiB, anonymous {again.peak_anon_mib:.1f} MiB, PSS "
                        f"{again.peak_pss_mib:.1f} MiB, {again.report_writes} report writes "
                        f"(load {os.getloadavg()[0]:.2f})"
                    )
            for mode in ("writing", "unchanged"):
                pairs = list(zip(modes[mode], modes["none"], strict=True))
                print(
                    f"  {mode} / none, per round: peak RSS "
                    + ", ".join(f"{r.peak_mib - o.peak_mib:+.1f}" for r, o in pairs)
                    + " MiB; anonymous "
                    + ", ".join(f"{r.peak_anon_mib - o.peak_anon_mib:+.1f}" for r, o in pairs)
                    + " MiB; PSS "
                    + ", ".join(f"{r.peak_pss_mib - o.peak_pss_mib:+.1f}" for r, o in pairs)
                    + " MiB; CPU x"
                    + ", ".join(f"{r.cpu / o.cpu:.3f}" for r, o in pairs)
                )
            if baseline is not None:
                theirs = baseline / ".venv" / "bin" / "celkeeper"
                for who, executable in ((baseline, theirs), (ROOT, CELKEEPER), (baseline, theirs)):
                    again = audit_process(cluster, work, celkeeper=executable)
                    print(f"  again, {who}: {describe(again, baseline_run)}")
            if args.large > args.pods:
                took = grow(cluster, args.pods, args.large)
                print(f"grown to {args.large} Pods in {took:.0f} s")
                run = audit_process(cluster, work)
                growth = run.peak_mib - baseline_run.peak_mib
                print(f"celkeeper audit --once over {run.objects} objects ({run.violations} violations):")
                print(f"  {describe(run, baseline_run)}")
                print(
                    f"  peak RSS {run.peak_mib:.0f} MiB; growth {growth:.0f} MiB over a run listing no Pods "
                    f"(target <= 100 MiB: {'met' if growth <= 100 else 'NOT met'})"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
