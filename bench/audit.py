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

With --baseline DIR (repeatable: another checkout, with its own venv, DIR/.venv, or run by this venv's
Python with PYTHONPATH=DIR, e.g. `git archive COMMIT | tar -x -C DIR`, its native library built as
setup.py builds it: `go build` of DIR/celkeeper/native/go into ~/.cache/celkeeper-native/<its sources'
hash>/), its code is measured in the same run on the same Pods, interleaved with this one's: the
evaluation alone (in a process of its own, on the same listed Pods) and the whole `celkeeper audit
--once` run, alternated --rounds times, each writing every report (deleted before it). `--env
NAME:VAR=VALUE,...` adds this tree with those environment variables (e.g. `--env gogc200:GOGC=200`) to
those runs. Each run's memory: peak RSS (VmHWM), what it was made of at the largest sample (anonymous
memory, file pages, of which the native library's file pages; sampled every 20 ms, the library's every
200 ms), and with --gctrace the Go heap's largest size (GODEBUG=gctrace=1: the heap when a collection
started, and the goal).

    .venv/bin/python bench/audit.py [--pods 10000] [--large 50000] [--engine cel-go|cel-python]
                                    [--baseline DIR] [--env NAME:VAR=VALUE,...] [--rounds 2]
                                    [--report-rounds 2] [--gctrace]
"""

from __future__ import annotations

import argparse
import json
import os
import re
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

from bench.support.variants import add_env_option, env_variant  # noqa: E402
from celkeeper.native.locate import VARIANTS  # noqa: E402
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
    venv = checkout / ".venv" / "bin" / "python"
    python = str(venv) if checkout != ROOT and venv.exists() else sys.executable
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


@dataclass(frozen=True)
class Contender:
    """A celkeeper to run: the command before `audit`, and what it adds to the environment."""

    name: str
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of_checkout(cls, name: str, checkout: Path) -> Contender:
        """Another checkout: its venv's celkeeper, else this venv's Python on its code (PYTHONPATH)."""
        own = checkout / ".venv" / "bin" / "celkeeper"
        if own.exists():
            return cls(name, (str(own),))
        # -P: not the current folder first on the path (this tree, when run from it)
        return cls(name, (sys.executable, "-P", "-m", "celkeeper"), (("PYTHONPATH", str(checkout)),))

    @classmethod
    def with_env(cls, spec: str) -> Contender:
        """NAME:VAR=VALUE,... : this tree with those variables."""
        name, env = env_variant(spec)
        return cls(name, (str(CELKEEPER),), tuple(env.items()))


THIS = Contender("this tree", (str(CELKEEPER),))


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
    # the largest RSS sample, what it was made of: anonymous memory and file pages (RssFile)
    sample_anon_mib: float = 0.0
    sample_file_mib: float = 0.0
    library_mib: float = 0.0  # the native library's file pages (code, read-only data), largest sample
    go_heap_mib: float = 0.0  # with GODEBUG=gctrace=1: the largest heap a collection started at
    go_goal_mib: float = 0.0  # and the largest heap goal

    def memory(self) -> str:
        go = (
            f"; Go heap up to {self.go_heap_mib:.0f} MB (goal {self.go_goal_mib:.0f} MB)"
            if self.go_goal_mib
            else ""
        )
        return (
            f"peak RSS {self.peak_mib:.1f} MiB (largest sample: anonymous {self.sample_anon_mib:.1f}, files "
            f"{self.sample_file_mib:.1f}; the library's file pages up to {self.library_mib:.1f} MiB){go}"
        )


def memory_kib(pid: int) -> dict[str, int]:
    """VmHWM (peak RSS so far), VmRSS, RssAnon and RssFile of the process, in KiB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    found = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
            found[key] = int(value.split()[0])
    return found


def pss_kib(pid: int) -> int:
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    for line in rollup.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


LIBRARIES = tuple(v.name for v in VARIANTS)


def library_file_kib(pid: int) -> int:
    """The resident pages of the native library's file in the process (its mappings' Rss less their
    private pages: the relocated data the dynamic loader wrote)."""
    try:
        text = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return 0
    total = 0
    ours = False
    for line in text.splitlines():
        head = line.split(None, 1)[0] if line else ""
        if "-" in head and not head.endswith(":"):
            ours = line.rstrip().endswith(LIBRARIES)
        elif ours and head == "Rss:":
            total += int(line.split()[1])
        elif ours and head == "Anonymous:":
            total -= int(line.split()[1])
    return total


GCTRACE = re.compile(r"(\d+)->(\d+)->(\d+) MB, (\d+) MB goal")


def log_lines(text: str) -> list[dict[str, Any]]:
    """The JSON lines of the audit's log (a line of the Go runtime's trace may precede one)."""
    out = []
    for line in text.splitlines():
        at = line.find('{"')
        if at < 0:
            continue
        try:
            out.append(json.loads(line[at:]))
        except ValueError:
            continue
    return out


def audit_process(cluster: Any, work: Path, *extra: str, who: Contender = THIS, gctrace: bool = False) -> Run:
    """Run `celkeeper audit --once` as a process of its own (`who`'s celkeeper)."""
    from bench.support.load import cpu_seconds

    log_path = work / f"audit-{time.monotonic_ns()}.log"
    argv = [
        *who.command,
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
    env = dict(os.environ, **dict(who.env))
    if gctrace:
        env["GODEBUG"] = ",".join(filter(None, (env.get("GODEBUG", ""), "gctrace=1")))
    apiserver = {cluster.apiserver.pid}
    api_before = cpu_seconds(apiserver)
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    peak_kib = peak_anon_kib = peak_pss_kib = library_kib = 0
    largest: dict[str, int] = {}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        # the peak RSS of the process's own address space (VmHWM starts afresh at exec; ru_maxrss would
        # count the pages of this big process it was forked from); its memory every 20 ms, what the
        # largest RSS sample was made of, and its PSS and the library's pages every 200 ms (smaps walks
        # the page tables), the peaks of those samples
        samples = 0
        while proc.poll() is None:
            now = memory_kib(proc.pid)
            peak_kib = max(peak_kib, now.get("VmHWM", 0))
            peak_anon_kib = max(peak_anon_kib, now.get("RssAnon", 0))
            if now.get("VmRSS", 0) > largest.get("VmRSS", 0):
                largest = now
            if samples % 10 == 0:
                peak_pss_kib = max(peak_pss_kib, pss_kib(proc.pid))
                library_kib = max(library_kib, library_file_kib(proc.pid))
            samples += 1
            time.sleep(0.02)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter() - began
    api_cpu = cpu_seconds(apiserver) - api_before
    code = proc.returncode
    text = log_path.read_text(errors="replace")
    lines = log_lines(text)
    finished = next((line for line in lines if line.get("event_type") == "audit_finished"), None)
    if code != 0 or finished is None:
        raise SystemExit(f"celkeeper audit ({who.name}) failed ({code}):\n{text[-3000:]}")
    started = next(line["ts"] for line in lines if line.get("event_type") == "audit_started")
    cpu = usage.ru_utime + usage.ru_stime - children_before.ru_utime - children_before.ru_stime
    collections = [tuple(int(x) for x in found) for found in GCTRACE.findall(text)]
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
        largest.get("RssAnon", 0) / 1024,
        largest.get("RssFile", 0) / 1024,
        library_kib / 1024,
        max((c[0] for c in collections), default=0),
        max((c[3] for c in collections), default=0),
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
        "--baseline",
        action="append",
        default=[],
        metavar="DIR",
        help="also measure this checkout (its .venv, else this venv's Python on its code), interleaved "
        "(repeatable)",
    )
    add_env_option(parser)
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="rounds of whole runs of each celkeeper compared, alternated (default 2)",
    )
    parser.add_argument(
        "--report-rounds",
        type=int,
        default=2,
        help="rounds of runs without, writing and keeping the OpenReports (default 2; 0: none)",
    )
    parser.add_argument(
        "--no-evaluation",
        action="store_true",
        help="leave out the evaluation alone in process (whole runs only)",
    )
    parser.add_argument(
        "--gctrace", action="store_true", help="the Go heap's largest size per run (GODEBUG=gctrace=1)"
    )
    args = parser.parse_args()
    baselines = [Path(b).resolve() for b in args.baseline]
    others = [Contender.of_checkout(f"baseline {b.name}", b) for b in baselines]
    others += [Contender.with_env(spec) for spec in args.env]
    try:
        binaries = find_binaries()
    except BinariesUnavailable as exc:
        print(f"skipped: {exc}")
        return 0
    from tests.support.apiserver import ControlPlane

    print(f"machine: {os.cpu_count()} CPUs; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
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
            if not args.no_evaluation:
                evaluate_in_process(cluster, args.engine, baselines)
            gctrace = args.gctrace
            # a run listing no Pods, for each celkeeper: what start-up, compilation and discovery cost
            empty = {
                who.name: audit_process(
                    cluster, work, "--excluded-resource", "pods", who=who, gctrace=gctrace
                )
                for who in (THIS, *others)
            }
            baseline_run = empty[THIS.name]
            run = audit_process(cluster, work, gctrace=gctrace)
            print(f"celkeeper audit --once over {run.objects} objects ({run.violations} violations):")
            print(f"  {describe(run, baseline_run)}")
            print(f"  target <= 10 s at 10,000: {'met' if run.seconds <= 10 else 'NOT met'}")
            print(f"  {run.memory()}")
            print(
                f"  a run listing no Pods: {baseline_run.memory()}; growth "
                f"{run.peak_mib - baseline_run.peak_mib:.0f} MiB (load {os.getloadavg()[0]:.2f})"
            )
            # the OpenReports: the run above wrote them; an unchanged run writes none
            print(f"  OpenReports: that run wrote {run.report_writes}")
            if args.report_rounds:
                report_costs(cluster, work, args.report_rounds, gctrace)
            if others:
                compare(cluster, work, [THIS, *others], args.rounds, empty, gctrace)
            if args.large > args.pods:
                took = grow(cluster, args.pods, args.large)
                print(f"grown to {args.large} Pods in {took:.0f} s")
                for who in (THIS, *others):
                    run = audit_process(cluster, work, who=who, gctrace=gctrace)
                    growth = run.peak_mib - empty[who.name].peak_mib
                    print(
                        f"{who.name}: celkeeper audit --once over {run.objects} objects "
                        f"({run.violations} violations):"
                    )
                    print(f"  {describe(run, empty[who.name])}")
                    print(f"  {run.memory()} (load {os.getloadavg()[0]:.2f})")
                    print(
                        f"  growth {growth:.0f} MiB over a run listing no Pods "
                        f"(target <= 100 MiB: {'met' if growth <= 100 else 'NOT met'})"
                    )
    return 0


def evaluate_in_process(cluster: Any, engine: str, baselines: list[Path]) -> None:
    """The evaluation alone of the listed Pods, this tree's and each baseline's, interleaved."""
    listing, evaluation, violations, listed = in_process(cluster, engine)
    print(f"in process ({engine}), {listing.objects} Pods, 20 constraints, {violations} violations:")
    per_cpu = evaluation.objects / evaluation.cpu
    print(
        f"  evaluation alone:           {evaluation.line()}   (target >= 5000: "
        f"{'met' if per_cpu >= 5000 else 'NOT met'} per CPU-second)"
    )
    for baseline in baselines:
        # interleaved: the baseline, this checkout again, the baseline again
        for checkout in (baseline, ROOT, baseline):
            rate, found = evaluate_listed(listed, engine, checkout)
            print(f"  evaluation alone, {checkout}: {rate.line()} ({found} violations)")
    del listed
    print(f"  list + parse, pages of 500: {listing.line()}")


def report_costs(cluster: Any, work: Path, rounds: int, gctrace: bool) -> None:
    """Runs without reports (--reports none), writing every report (deleted before the run) and finding
    them unchanged, alternated."""
    print(f"  OpenReports' cost, {rounds} rounds (peak RSS exact; anonymous memory and PSS sampled):")
    modes: dict[str, list[Run]] = {"none": [], "writing": [], "unchanged": []}
    for round_ in range(rounds):
        order = list(modes) if round_ % 2 == 0 else list(reversed(modes))
        for mode in order:
            if mode == "writing":
                delete_reports(cluster)
            again = audit_process(
                cluster,
                work,
                "--reports",
                "none" if mode == "none" else "openreports",
                gctrace=gctrace,
            )
            modes[mode].append(again)
            print(
                f"    {mode:<9}: run {again.seconds:.2f} s, CPU {again.cpu:.2f} s, {again.memory()}, "
                f"peak anonymous {again.peak_anon_mib:.1f} MiB, PSS {again.peak_pss_mib:.1f} MiB, "
                f"{again.report_writes} report writes (load {os.getloadavg()[0]:.2f})"
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


def compare(
    cluster: Any,
    work: Path,
    contenders: list[Contender],
    rounds: int,
    empty: dict[str, Run],
    gctrace: bool,
) -> None:
    """Whole runs of each celkeeper, each writing every report (deleted before it), alternated: memory
    and CPU side by side, and each against this tree in the same round."""
    print(f"side by side, {rounds} rounds, each run writing every report:")
    runs: dict[str, list[Run]] = {who.name: [] for who in contenders}
    for round_ in range(rounds):
        order = contenders if round_ % 2 == 0 else list(reversed(contenders))
        for who in order:
            delete_reports(cluster)
            again = audit_process(cluster, work, who=who, gctrace=gctrace)
            runs[who.name].append(again)
            print(f"  {who.name}: {describe(again, empty[who.name])}")
            print(
                f"    {again.memory()}, peak anonymous {again.peak_anon_mib:.1f} MiB; "
                f"{again.report_writes} report writes (load {os.getloadavg()[0]:.2f})"
            )
    ours = runs[THIS.name]
    for who in contenders[1:]:
        pairs = list(zip(ours, runs[who.name], strict=True))
        print(
            f"  this tree / {who.name}, per round: peak RSS "
            + ", ".join(
                f"{a.peak_mib - b.peak_mib:+.1f} MiB (x{a.peak_mib / b.peak_mib:.3f})" for a, b in pairs
            )
            + "; anonymous "
            + ", ".join(f"{a.sample_anon_mib - b.sample_anon_mib:+.1f}" for a, b in pairs)
            + " MiB; CPU x"
            + ", ".join(f"{a.cpu / b.cpu:.3f}" for a, b in pairs)
        )


if __name__ == "__main__":
    raise SystemExit(main())
