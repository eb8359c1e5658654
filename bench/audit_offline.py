"""`celkeeper audit --objects` over files: 20,000 realistic Pods as one List, as a `---` stream, as a folder
of Lists and on standard input, each run in a fresh process, against `gator test` on the same Pods and
against the in-cluster audit of the same Pods.

The policies are bench/webhook.py's: the Pod templates and constraints of examples/ (20 constraints, copies
renamed). The Pods are tests/support/pods.py's `realistic_pod` (~2.6 KB of YAML each) in ten namespaces,
one in ten from Docker Hub and tagged latest; their Namespaces come
first, as `kubectl get namespaces,pods -A -o yaml` prints them. The files are written as kubectl writes
them (a `kind: List`, its items first, keys sorted). Forms:
  - list     one `kind: List` of every object (one YAML document)
  - stream   one document per object (`---`)
  - folder   Lists of 100 Pods each (files of ~260 KB: what the policy reader took whole before)
  - stdin    the List, piped (`kubectl get ns,pods -A -o yaml | celkeeper audit --objects -`)
  - json     the List as `kubectl get -o json` writes it
For each: wall time, CPU time (user + system, os.wait4: its reader process's too, cli.reader) and peak
RSS (VmHWM, polled: the process's and its reader's, summed), how many objects it read and audited and
its violation totals, which must be equal in every form and equal to the in-cluster audit's evaluation
of the same Pods: audit.Evaluator on each Pod JSON-decoded (as a listed page is) with its Namespace, in a
process of its own (`reference`), which also gives the evaluation's CPU per object, start-up left out.
`gator test` (hack/gator, when built) runs on the stream form (gator reviews a List as one object: it
does not expand Lists) with the same policies in Gatekeeper's API groups.
With --in-cluster, the same Pods are created on a kube-apiserver of its own (hack/kube/build.sh's
binaries; a few minutes) and `celkeeper audit --source kubernetes --once` audits them: its CPU per
object (the whole process, as the offline runs are measured) and its totals (each constraint's status).

With --baseline DIR (another checkout, e.g. `git archive main | tar -x -C DIR`), its code runs the same
forms with this venv's Python (PYTHONPATH=DIR): before/after figures from one run.

    .venv/bin/python bench/audit_offline.py [--pods 20000] [--forms list,stream,folder,stdin,json]
                                            [--engine NAME] [--baseline DIR] [--no-gator] [--in-cluster]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FORMS = ("list", "stream", "folder", "stdin", "json")
NAMESPACES = 10
VIOLATING_EVERY = 10
PER_FILE = 100  # Pods per List of the folder form


@dataclass
class Run:
    name: str
    wall: float
    cpu: float
    rss_mib: float
    code: int
    out: str
    err: str

    def row(self, pods: int) -> str:
        return (
            f"{self.name:<22} {self.wall:7.1f} s wall {self.cpu:7.1f} s CPU {self.rss_mib:7.0f} MiB peak RSS "
            f"{self.cpu / pods * 1e3:6.2f} ms CPU/object  exit {self.code}"
        )


def measure(
    name: str, argv: list[str], cwd: Path, stdin: Path | None = None, env: dict[str, str] | None = None
) -> Run:
    """A fresh process: its wall time, CPU time (wait4: its children's too) and peak RSS (the VmHWM of its
    own address space and of each of its children's, polled and summed: ru_maxrss would count the pages
    of the process it was forked from), and its output."""
    out_path, err_path = cwd / f"{name}.out", cwd / f"{name}.err"
    peaks: dict[int, int] = {}
    with out_path.open("wb") as out, err_path.open("wb") as err:
        source = stdin.open("rb") if stdin is not None else None
        try:
            start = time.perf_counter()
            proc = subprocess.Popen(
                argv, stdin=source or subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd, env=env
            )
            while True:
                for each in (proc.pid, *_children(proc.pid)):
                    peaks[each] = max(peaks.get(each, 0), _high_water_kib(each))
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                time.sleep(0.02)
            wall = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            if source is not None:
                source.close()
    return Run(
        name,
        wall,
        usage.ru_utime + usage.ru_stime,
        sum(peaks.values()) / 1024,
        proc.returncode,
        out_path.read_text(errors="replace"),
        err_path.read_text(errors="replace"),
    )


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _high_water_kib(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)


# -- the inputs ----------------------------------------------------------------------------------------------


def pods(count: int) -> list[dict[str, Any]]:
    """One Pod in ten from Docker Hub, tagged latest: it breaks more constraints than the others."""
    from tests.support.pods import realistic_pod

    out = []
    for i in range(count):
        odd = i % VIOLATING_EVERY == 0
        image = "docker.io/library/nginx:latest" if odd else "registry.example.com/team/app:1.4.2"
        out.append(realistic_pod(f"web-{i:06d}", f"team-{i % NAMESPACES}", image=image))
    return out


def namespaces() -> list[dict[str, Any]]:
    """The Pods' Namespaces, as the API server stores them (the name label it adds): among the objects,
    first, as `kubectl get namespaces,pods -A -o yaml` prints them, so that constraints with a
    namespaceSelector see what the in-cluster audit sees."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": f"team-{i}", "labels": {"kubernetes.io/metadata.name": f"team-{i}"}},
        }
        for i in range(NAMESPACES)
    ]


def _yaml(obj: Any) -> str:
    import yaml

    return yaml.dump(obj, Dumper=yaml.CSafeDumper, sort_keys=True, default_flow_style=False, width=1 << 20)


def _list_text(items: list[str]) -> str:
    """kubectl's `-o yaml` of a List: apiVersion, items (each a block sequence entry), kind, metadata."""
    out = ["apiVersion: v1\nitems:\n"]
    for text in items:
        lines = text.rstrip("\n").split("\n")
        out.append("- " + lines[0] + "\n" + "".join(f"  {line}\n" for line in lines[1:]))
    out.append('kind: List\nmetadata:\n  resourceVersion: ""\n')
    return "".join(out)


def write_inputs(base: Path, count: int, forms: tuple[str, ...]) -> tuple[dict[str, Path], Path]:
    """The forms' files, and the Pods as JSON lines (the reference reads those, as the API lists them)."""
    objects = namespaces() + pods(count)
    texts = [_yaml(p) for p in objects]
    paths: dict[str, Path] = {}
    if {"list", "stdin"} & set(forms):
        paths["list"] = base / "pods-list.yaml"
        paths["list"].write_text(_list_text(texts))
        paths["stdin"] = paths["list"]
    if "stream" in forms:
        paths["stream"] = base / "pods-stream.yaml"
        paths["stream"].write_text("---\n".join(texts))
    if "folder" in forms:
        folder = paths["folder"] = base / "pods-folder"
        folder.mkdir()
        (folder / "namespaces.yaml").write_text(_list_text(texts[:NAMESPACES]))
        for start in range(NAMESPACES, len(texts), PER_FILE):
            (folder / f"pods-{start:06d}.yaml").write_text(_list_text(texts[start : start + PER_FILE]))
    if "json" in forms:
        paths["json"] = base / "pods-list.json"
        document = {"apiVersion": "v1", "items": objects, "kind": "List", "metadata": {"resourceVersion": ""}}
        paths["json"].write_text(json.dumps(document, indent=4))
    lines = base / "pods.jsonl"
    lines.write_text("".join(json.dumps(p) + "\n" for p in objects[NAMESPACES:]))
    return paths, lines


# -- the reference: the in-cluster audit's evaluation --------------------------------------------------------


def reference(policy_dir: str, lines: str, engine: str | None) -> None:
    """Prints {"cpu_per_object", "totals", "objects"}: each Pod JSON-decoded (as the audit decodes a listed
    page) and evaluated by audit.Evaluator, as the in-cluster audit does; the policies' loading left out."""
    from celkeeper.audit import Evaluator, RunResults
    from celkeeper.cli import files
    from celkeeper.gator.backend import PolicyBackend
    from celkeeper.gator.kinds import is_policy_document
    from celkeeper.model import EnforcementPoint
    from celkeeper.settings import DEFAULT_ENGINE, parse_engine

    documents = files.read_all([policy_dir]).documents
    backend = PolicyBackend(parse_engine(engine or DEFAULT_ENGINE), EnforcementPoint.AUDIT)
    loaded = backend.build([d for d in documents if is_policy_document(d)])
    evaluator = Evaluator(loaded.policies)
    results = RunResults()
    texts = Path(lines).read_text().splitlines()
    known = {n["metadata"]["name"]: n for n in namespaces()}
    evaluator.evaluate(json.loads(texts[0]), None)  # the engine's first call out of the measure
    start = time.process_time()
    for text in texts:
        obj = json.loads(text)
        outcome = evaluator.evaluate(obj, known.get(obj["metadata"]["namespace"]))
        for violation in outcome.violations:
            results.add(violation)
    cpu = time.process_time() - start
    totals = {f"{k[0]}/{k[1]}": r.total for k, r in sorted(results.constraints.items())}
    print(json.dumps({"cpu_per_object": cpu / len(texts), "totals": totals, "objects": len(texts)}))


def in_cluster(policy_dir: Path, count: int, work: Path, engine: list[str]) -> Run | None:
    """The in-cluster audit (`celkeeper audit --source kubernetes --once`, a process of its own) of the
    same Pods under the same policies, on a kube-apiserver of its own (hack/kube/build.sh's binaries;
    None without them): its CPU per object is the yardstick of the offline audit's."""
    from tests.support.binaries import BinariesUnavailable, find_binaries

    try:
        binaries = find_binaries()
    except BinariesUnavailable as exc:
        print(f"in-cluster audit: skipped: {exc}")
        return None
    from bench.audit import audit_process
    from celkeeper.cli import files
    from celkeeper.crds import constraint_crd
    from tests.incluster.support import install_crds
    from tests.support.apiserver import ControlPlane
    from tests.support.bulk import create_many
    from tests.support.kubectl import apply

    documents = [d.data for d in files.read_all([str(policy_dir)]).documents]
    templates = {json.dumps(d, sort_keys=True): d for d in documents if d["kind"] == "ConstraintTemplate"}
    with ControlPlane(work / "kube", binaries) as cluster:
        for i in range(NAMESPACES):
            cluster.kubectl("create", "namespace", f"team-{i}")
        install_crds(cluster)
        for template in templates.values():
            apply(cluster, template)
            cluster.kubectl("apply", "-f", "-", input=constraint_crd(template))
        for template in templates.values():
            name = template["spec"]["crd"]["spec"]["names"]["kind"].lower()
            cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}.constraints.celkeeper.io")
        for constraint in (d for d in documents if d["kind"] != "ConstraintTemplate"):
            apply(cluster, constraint)
        began = time.perf_counter()
        created = create_many(cluster, pods(count), threads=8)
        print(f"in-cluster: {created} Pods created in {time.perf_counter() - began:.0f} s")
        found = audit_process(cluster, work, *engine)
        totals: dict[str, int] = {}
        for kind in sorted({d["kind"] for d in documents if d["kind"] != "ConstraintTemplate"}):
            listed = json.loads(
                cluster.kubectl("get", f"{kind.lower()}.constraints.celkeeper.io", "-o", "json").stdout
            )
            for item in listed["items"]:
                if item.get("status", {}).get("totalViolations"):
                    totals[f"{kind}/{item['metadata']['name']}"] = item["status"]["totalViolations"]
        print(
            f"in-cluster audit (--once): {found.objects} objects, {found.violations} violations; process "
            f"{found.wall:.1f} s wall, {found.cpu:.1f} s CPU, {found.peak_mib:.0f} MiB peak RSS "
            f"({found.cpu / max(found.objects, 1) * 1e3:.2f} ms CPU per object)"
        )
        return Run(
            "in-cluster audit",
            found.wall,
            found.cpu,
            found.peak_mib,
            0,
            str(found.objects),
            json.dumps(totals),
        )


def _totals(run: Run) -> tuple[int, int, dict[str, int]] | None:
    """(objects read, audited, violations per constraint) from `-o json`; None when it printed none."""
    try:
        doc = json.loads(run.out)
    except json.JSONDecodeError:
        return None
    totals = {
        f"{c['kind']}/{c['name']}": c["status"]["totalViolations"]
        for c in doc["constraints"]
        if c["status"]["totalViolations"]
    }
    return doc.get("read", doc["objects"]), doc["objects"], totals


def _summary(run: Run) -> str:
    lines = [line for line in run.err.splitlines() if "summary:" in line or "objects read" in line]
    return lines[-1] if lines else (run.err.strip().splitlines() or [""])[-1][:150]


# -- main ----------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--forms", default=",".join(FORMS))
    parser.add_argument("--engine", default=None)
    parser.add_argument("--baseline", metavar="DIR", help="another checkout's celkeeper, run the same way")
    parser.add_argument("--no-gator", action="store_true")
    parser.add_argument(
        "--in-cluster",
        action="store_true",
        help="also run the in-cluster audit of the same Pods (a kube-apiserver of its own; minutes)",
    )
    parser.add_argument("--reference", nargs=2, metavar=("POLICIES", "PODS_JSONL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reference:
        reference(*args.reference, args.engine)
        return 0
    forms = tuple(f for f in args.forms.split(",") if f)
    from bench.webhook import write_policies
    from tests.e2e.gator.conftest import gatekeeper_copy

    engine = ["--engine", args.engine] if args.engine else []
    with tempfile.TemporaryDirectory(prefix="bench-audit-offline-") as tmp:
        base = Path(tmp)
        policies = base / "policies"
        write_policies(policies)
        began = time.perf_counter()
        paths, lines = write_inputs(base, args.pods, forms)
        sizes = {
            f: (p.stat().st_size if p.is_file() else sum(x.stat().st_size for x in p.iterdir()))
            for f, p in paths.items()
        }
        print(
            f"{args.pods} Pods written in {time.perf_counter() - began:.0f} s: "
            + ", ".join(f"{f} {sizes[f] / 2**20:.0f} MiB" for f in forms)
        )
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
        sides = [("", env)]
        if args.baseline:
            sides.append(("before ", {**env, "PYTHONPATH": str(Path(args.baseline).resolve())}))

        ref = measure(
            "reference",
            [sys.executable, __file__, "--reference", str(policies), str(lines), *engine[1:]],
            base,
        )
        expected = json.loads(ref.out) if ref.code == 0 else None
        if expected is None:
            print(f"reference failed: {ref.err[-2000:]}")
            return 1
        print(
            "in-cluster audit's evaluation (reference): "
            f"{expected['cpu_per_object'] * 1e3:.2f} ms CPU per object, "
            f"{sum(expected['totals'].values())} violations"
        )

        runs: list[tuple[str, Run]] = []
        for label, side_env in sides:
            for form in forms:
                target = "-" if form == "stdin" else str(paths[form])
                argv = [
                    sys.executable,
                    "-m",
                    "celkeeper",
                    "audit",
                    "--policy-dir",
                    str(policies),
                    "--objects",
                    target,
                    "-o",
                    "json",
                    *engine,
                ]
                run = measure(
                    f"{label}{form}".replace(" ", "-"),
                    argv,
                    base,
                    paths[form] if form == "stdin" else None,
                    side_env,
                )
                run.name = f"{label}{form}"
                runs.append((form, run))
                print(run.row(args.pods))
                counts = _totals(run)
                if counts is None:
                    print(f"    no result: {_summary(run)}")
                else:
                    read, audited, totals = counts
                    same = (
                        "equal to the reference's"
                        if totals == expected["totals"]
                        else "DIFFERENT from the reference's"
                    )
                    print(
                        f"    {read} read, {audited} audited, {sum(totals.values())} violations: "
                        f"totals {same}"
                    )
                    print(f"    {_summary(run)}")
        gator_run = None
        if not args.no_gator:
            from tests.support.gator import GatorUnavailable, find_gator

            try:
                gator = find_gator()
            except GatorUnavailable as exc:
                print(f"gator: skipped: {exc}")
            else:
                stream = paths.get("stream") or base / "pods-stream-gator.yaml"
                if not stream.exists():
                    stream.write_text("---\n".join(_yaml(p) for p in pods(args.pods)))
                gk = gatekeeper_copy(policies, base / "policies-gatekeeper")
                gator_run = measure("gator", [str(gator), "test", "-f", str(gk), "-f", str(stream)], base)
                print(
                    gator_run.row(args.pods)
                    + f"   ({len(gator_run.out.splitlines())} result lines; stream form)"
                )
        cluster_run = in_cluster(policies, args.pods, base, engine) if args.in_cluster else None
        print()
        yardsticks = [("the in-cluster audit's evaluation alone", expected["cpu_per_object"])]
        if cluster_run is not None:
            same = json.loads(cluster_run.err) == expected["totals"]
            print(
                f"in-cluster totals {'equal to' if same else 'DIFFERENT from'} the reference's: "
                f"{cluster_run.err}"
            )
            yardsticks.append(
                ("the in-cluster audit's whole process", cluster_run.cpu / int(cluster_run.out))
            )
        for what, per_object in yardsticks:
            print(f"CPU per object against {what} ({per_object * 1e3:.2f} ms; whole offline processes):")
            for _, run in runs:
                print(f"  {run.name:<22} x{run.cpu / args.pods / per_object:.2f}")
        if gator_run is not None:
            print("gator test (stream form) against each:")
            for _, run in runs:
                print(
                    f"  {run.name:<22} x{gator_run.wall / run.wall:.1f} wall, x{gator_run.cpu / run.cpu:.1f} "
                    f"CPU, x{gator_run.rss_mib / max(run.rss_mib, 1):.1f} peak RSS"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
