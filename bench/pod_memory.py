#!/usr/bin/env python3
"""Where a webhook pod's memory goes: the PSS of each process of `celkeeper serve` (master, informer, each
worker), split by what holds it, after a load, in one run for each server compared.

Each server is `celkeeper serve` on the folder source with bench/webhook.py's 12 templates and 20 Pod
constraints (`--workers`, default 1: the chart's and the command's default), started alone; it answers
`--reviews` reviews (wrk, 8 connections; allowed and denied Pods alternated), then each process's
proportional set size (PSS, /proc/<pid>/smaps) is read and split by mapping:

  - `so file` / `so anon`: celkeeper's native library (libcelkeeper.so, or its variant without the
    admission policies, libcelkeeper-gatekeeper.so, which the workers load without
    --enforce-admission-policies): the pages of its code and data
    read from the file (shared between the processes that map it: each is charged its share), and those
    its dynamic relocations and writes made private to the process;
  - `anon`: every other anonymous page: Python's objects (pymalloc's arenas, malloc's [heap]), C
    libraries', the Go runtime's heap and structures (Go 1.26 puts its heap arenas at a random address:
    they are not told apart here; `--env NAME:GOGC=...` shows what the Go heap's share does);
  - `files`: every other file-backed page: the Python interpreter, extension modules, C libraries.

`--source kubernetes`: each server is `celkeeper serve --source kubernetes` as its pods run it instead (the
webhook pod's RBAC of deploy/celkeeper.yaml, its own pod namespace), against one real control plane
(tests/support: kube-apiserver and etcd) that holds celkeeper's CRDs, the same templates, constraints and
namespace, applied through the API as bench/gatekeeper.py applies them; Gatekeeper's CRDs are installed
too (`--no-gatekeeper-crds`: not), as bench/gatekeeper.py has them beside celkeeper's. Needs the kube
binaries (hack/kube/build.sh).

Servers compared (`--baseline DIR`, repeatable: another checkout's celkeeper, e.g. `git archive main | tar
-x -C DIR`, with its native library built (the same Go sources share one build);
`--env NAME:VAR=VALUE,...`: this tree with those environment variables, e.g. `--env gogc100:GOGC=100`)
run one after the other, alone, in one run, each after the native library's builds are dropped from the
page cache (so that each reads its library from disk alike).

    .venv/bin/python bench/pod_memory.py [--reviews 20000] [--workers 1] [--baseline DIR] [--env ...]
                                         [--rounds N] [--source kubernetes]

A long run (issue 29: "1,000,000 reviews at a steady rate: every process's RSS after warm-up within +10
MiB"): `--rate R` sends the reviews in an open loop at R per second (wrk paced; without it, a closed loop
as fast as the server answers), `--every B` reads every process's RSS and PSS after each block of B
reviews and prints it, then, per process, its RSS and PSS at the end of warm-up (`--warmup`, default one
block), their largest growth since and the slope of a least-squares line through the samples after
warm-up, in MiB per 100,000 reviews:

    .venv/bin/python bench/pod_memory.py --source kubernetes --reviews 1000000 --rate 800 --every 50000

`--probe DIR`: every process of the servers also samples what holds its memory from inside
(bench/support/memprobe/sitecustomize.py: smaps by mapping, glibc's arenas, pymalloc, the Go runtime's
figures, Python's objects; with `--env NAME:PYTHONTRACEMALLOC=1`, tracemalloc's growth by line) into
DIR/<pid>.jsonl, and the first and last samples after warm-up are printed side by side. The probe costs
CPU: its runs say where memory goes, not how much the server alone holds.

Needs wrk (`apt-get install -y wrk`). About a minute per server (a long run: --reviews / --rate seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.support.load import run_wrk, tree  # noqa: E402
from bench.support.memprobe import ck_smaps  # noqa: E402
from bench.support.variants import add_env_option, env_variant  # noqa: E402
from bench.webhook import (  # noqa: E402
    bench_pod,
    denied_pod,
    folder_serve_args,
    write_namespaces,
    write_policies,
)
from celkeeper.native.locate import VARIANTS, cache_root  # noqa: E402
from tests.support.serve import ServeProcess, review  # noqa: E402

if TYPE_CHECKING:
    from tests.support.apiserver import ControlPlane

CONNECTIONS = 8
PROBE = ROOT / "bench" / "support" / "memprobe"
PARTS = ("so file", "so anon", "anon", "files")
LIBRARIES = tuple(v.name for v in VARIANTS)  # a wheel's copies (_NAME) end so too


@dataclass
class Memory:
    """One process's PSS in MiB, split by PARTS."""

    parts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))

    @property
    def total(self) -> float:
        return sum(self.parts.values())


def split_pss(pid: int) -> Memory:
    """The process's PSS split by mapping (see the module docstring)."""
    memory = Memory()
    for name, pss, anon in ck_smaps.mappings(pid):
        if name.endswith(LIBRARIES):
            memory.parts["so file"] += (pss - anon) / 1024
            memory.parts["so anon"] += anon / 1024
        elif name.startswith("/"):
            memory.parts["files"] += (pss - anon) / 1024
            memory.parts["anon"] += anon / 1024
        else:
            memory.parts["anon"] += pss / 1024
    return memory


@dataclass
class Variant:
    name: str
    root: Path
    env: dict[str, str]


def parse_env(spec: str) -> Variant:
    name, env = env_variant(spec)
    return Variant(name, ROOT, env)


Rows = list[tuple[str, int, Memory]]


def evict_libraries() -> None:
    """Drop the native library's builds from the page cache (none is mapped between two servers): each
    server reads its library from disk alike. How many of its pages a process has resident depends on how
    the file came into the page cache (just written by a build, or read; large folios are mapped whole)."""
    for path in (p for name in LIBRARIES for p in cache_root().glob(f"*/{name}")):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def folder_server(variant: Variant, work: Path, args: argparse.Namespace) -> ServeProcess:
    """`celkeeper serve` on the folder source, started."""
    server = ServeProcess(
        Path(tempfile.mkdtemp(prefix="serve-", dir=work)),
        work / "policies",
        workers=args.workers,
        args=folder_serve_args(work),
        env=variant.env,
        root=variant.root,
    )
    server.start(timeout=180)
    return server


def kube_server(
    variant: Variant, work: Path, args: argparse.Namespace, cluster: ControlPlane
) -> ServeProcess:
    """`celkeeper serve --source kubernetes` as its pods run it, started; the policies applied through the
    API the first time (the first server makes their constraint CRDs), every constraint loaded."""
    from bench.gatekeeper import apply_policies
    from tests.incluster.support import KubeServe, deployment_setting

    pod_namespace, kubeconfig = deployment_setting(cluster, "ck")
    server = KubeServe(
        Path(tempfile.mkdtemp(prefix="serve-", dir=work)),
        kubeconfig,
        f"celkeeper-bench-{pod_namespace}",
        pod_namespace,
        workers=args.workers,
        args=["--log-level", "warning", "--max-requests", "0"],
        root=variant.root,
    )
    server.extra_env.update(variant.env)
    server.start(timeout=180, wait_ready=False)
    try:
        if not getattr(cluster, "policies_applied", False):
            apply_policies(cluster, work / "policies", gatekeeper=False)
            cluster.policies_applied = True  # type: ignore[attr-defined]
        server.wait_ready(180)
        deadline = time.monotonic() + 180
        counts: list[int] = []
        while True:  # every constraint loaded: the same denial three times running
            status, answer = server.admit(review(denied_pod(), uid="bench-denied"))
            response = answer.get("response") or {}
            message = (response.get("status") or {}).get("message", "")
            counts.append(0 if status != 200 or response.get("allowed", True) else len(message.splitlines()))
            if counts[-1] and counts[-3:] == [counts[-1]] * 3:
                return server
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: {variant.name} does not deny the denied Pod: {answer}")
            time.sleep(1)
    except BaseException:
        server.stop()
        raise


def rss_pss(pid: int) -> tuple[float, float]:
    """The process's RSS and PSS in MiB (/proc/<pid>/smaps_rollup)."""
    figures = ck_smaps.rollup(pid)
    return figures["Rss"], figures["Pss"]


@dataclass
class Track:
    """A long run's samples of one process: (reviews served, RSS, PSS) after each block."""

    role: str
    pid: int
    samples: list[tuple[int, float, float]] = field(default_factory=list)


def slope(points: list[tuple[int, float]]) -> float:
    """The least-squares slope of (reviews, MiB), in MiB per 100,000 reviews (0 with fewer than 2)."""
    if len(points) < 2:
        return 0.0
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return sxy / sxx * 100_000 if sxx else 0.0


def roles(server: ServeProcess) -> list[tuple[str, int]]:
    assert server.process is not None
    found = [("master", server.process.pid), ("informer", server.informer_pid())]
    found += [(f"worker {i + 1}", pid) for i, pid in enumerate(sorted(server.worker_pids()))]
    return found


def sample_block(tracks: list[Track], server: ServeProcess, served: int, name: str, pace: str) -> None:
    """Every process's RSS and PSS now, kept and printed on one line with `pace` (the block's rate and
    server CPU per review); a process replaced ends the run."""
    now = dict(roles(server))
    cells = []
    pod = 0.0
    for track in tracks:
        if now.get(track.role) != track.pid:
            replaced = f"{track.role} {track.pid} was replaced (now {now.get(track.role)})"
            raise SystemExit(f"bench: {name}: {replaced}")
        rss, pss = rss_pss(track.pid)
        track.samples.append((served, rss, pss))
        cells.append(f"{track.role} {rss:6.1f}/{pss:6.1f}")
        pod += pss
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"  {served:>9,}  " + "  ".join(cells) + f"  pod PSS {pod:6.1f}  {pace}, load {load}", flush=True)


def report_tracks(name: str, tracks: list[Track], warmup: int) -> None:
    """Per process: RSS and PSS at the end of warm-up, at the end, the largest growth since, the slopes."""
    print(f"{name}: RSS / PSS in MiB after warm-up ({warmup:,} reviews), issue 29: RSS within +10 MiB")
    for track in tracks:
        after = [s for s in track.samples if s[0] >= warmup]
        if len(after) < 2:
            print(f"  {track.role:<9} too few samples after warm-up")
            continue
        (_, rss0, pss0), (last, rss1, pss1) = after[0], after[-1]
        grew = max(s[1] for s in after) - rss0
        rss_slope = slope([(s[0], s[1]) for s in after])
        pss_slope = slope([(s[0], s[2]) for s in after])
        print(
            f"  {track.role:<9} RSS {rss0:6.1f} -> {rss1:6.1f} (largest {grew:+5.1f}), "
            f"{rss_slope:+5.2f} per 100k; PSS {pss0:6.1f} -> {pss1:6.1f}, {pss_slope:+5.2f} per 100k "
            f"({after[0][0]:,} -> {last:,} reviews){'' if grew <= 10 else '  OVER +10 MiB'}"
        )


def measure(
    variant: Variant, work: Path, args: argparse.Namespace, cluster: ControlPlane | None
) -> tuple[Rows, float, float]:
    """Serve, load, read: (role, pid, memory) per process; reviews/s and server CPU per review."""
    evict_libraries()
    if cluster is None:
        server = folder_server(variant, work, args)
    else:
        server = kube_server(variant, work, args, cluster)
    try:
        status, answer = server.admit(review(denied_pod(), uid="bench-denied"))
        if status != 200 or answer["response"]["allowed"]:
            raise SystemExit(f"bench: {variant.name} does not deny the denied Pod: {answer}")
        assert server.process is not None
        pids = {server.process.pid, server.informer_pid(), *server.worker_pids()}
        tracks = [Track(role, pid) for role, pid in roles(server)] if args.every else []
        served, cpu, seconds = 0, 0.0, 0.0
        bodies = [work / "allowed.json", work / "denied.json"]
        rounds = 0
        # a run of wrk: 5 s (10 s paced: fewer new connections), or what is left of the block
        chunk = 10 if args.rate else 5
        next_sample = args.every or 0
        mark = (0, 0.0, 0.0)  # reviews, server CPU and seconds at the last sample
        if tracks:
            print(f"{variant.name}: RSS/PSS in MiB after each block of {args.every:,} reviews", flush=True)
        while served < args.reviews:
            body = bodies[rounds % 2]
            rounds += 1
            duration = chunk
            if args.rate and next_sample:
                duration = max(1, min(chunk, round((next_sample - served) / args.rate)))
            result = run_wrk(server.url("/v1/admit"), body, work, duration, CONNECTIONS, 1, args.rate, pids)
            if result.requests == 0 or result.errors:
                raise SystemExit(f"bench: {variant.name} failed reviews:\n{server.log()}")
            served += result.requests
            cpu += result.server_cpu
            seconds += result.requests / result.rate
            if next_sample and served >= next_sample - (args.rate or 0) / 2:
                block, block_cpu, block_seconds = served - mark[0], cpu - mark[1], seconds - mark[2]
                pace = f"{block / block_seconds:,.0f}/s, {block_cpu / block * 1e6:,.0f} us CPU per review"
                sample_block(tracks, server, served, variant.name, pace)
                mark = (served, cpu, seconds)
                while next_sample <= served + (args.rate or 0) / 2:
                    next_sample += args.every
        time.sleep(args.settle)  # the informer's next round, the collectors settle (an idle worker trims)
        rows = [("master", server.process.pid, split_pss(server.process.pid))]
        rows.append(("informer", server.informer_pid(), split_pss(server.informer_pid())))
        for i, pid in enumerate(sorted(server.worker_pids())):
            rows.append((f"worker {i + 1}", pid, split_pss(pid)))
        # any other process of the pod: the informer's library process while a round compiles
        for pid in sorted(tree(server.process.pid) - {pid for _, pid, _ in rows}):
            with contextlib.suppress(OSError):
                rows.append(("other", pid, split_pss(pid)))
        print(
            f"{variant.name}: {served:,} reviews, {served / seconds:,.0f}/s, "
            f"server CPU {cpu / served * 1e6:,.0f} us per review",
            flush=True,
        )
        if tracks:
            report_tracks(variant.name, tracks, args.warmup if args.warmup is not None else args.every)
        return rows, served / seconds, cpu / served
    finally:
        server.stop()


@contextlib.contextmanager
def control_plane(work: Path, gatekeeper_crds: bool) -> Iterator[ControlPlane]:
    """A kube-apiserver and etcd with the bench's namespace (and Gatekeeper's CRDs)."""
    from bench.webhook import NAMESPACE
    from tests.support.apiserver import ControlPlane
    from tests.support.gatekeeper import install_crds

    with ControlPlane(work / "cluster") as cluster:
        if gatekeeper_crds:
            install_crds(cluster)
        labels = json.loads((work / "namespaces.yaml").read_text())["metadata"]["labels"]
        metadata = {"name": NAMESPACE, "labels": labels}
        cluster.kubectl(
            "apply", "-f", "-", input={"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
        )
        yield cluster


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reviews", type=int, default=20_000, help="reviews before reading (default 20000)")
    parser.add_argument(
        "--workers", type=int, default=1, help="celkeeper's --workers (default 1, its default)"
    )
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        action="append",
        default=[],
        help="also measure the celkeeper of this checkout (repeatable)",
    )
    add_env_option(parser)
    parser.add_argument(
        "--source",
        choices=("folder", "kubernetes"),
        default="folder",
        help="the servers' policy source (default folder; kubernetes: against a real kube-apiserver)",
    )
    parser.add_argument(
        "--no-gatekeeper-crds",
        action="store_true",
        help="with --source kubernetes: leave Gatekeeper's CRDs out of the control plane",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="measure every server this many times, alternated (default 1)"
    )
    parser.add_argument(
        "--rate", type=float, default=None, help="reviews per second, an open loop (default: a closed loop)"
    )
    parser.add_argument(
        "--every",
        type=int,
        default=0,
        help="read every process's RSS and PSS after each block of this many reviews",
    )
    parser.add_argument(
        "--warmup", type=int, default=None, help="with --every: reviews of warm-up (default one block)"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=2.0,
        help="seconds between the last review and the reading (default 2; an idle worker returns its Go "
        "heap's free memory after 2-4 s: webhook/idle.py)",
    )
    parser.add_argument(
        "--probe", metavar="DIR", type=Path, default=None, help="sample each process from inside (see above)"
    )
    parser.add_argument(
        "--probe-interval",
        type=float,
        default=30.0,
        help="with --probe: seconds between samples (default 30)",
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("bench: needs wrk (apt-get install -y wrk)")
    variants = [Variant("this tree", ROOT, {})]
    for i, baseline in enumerate(args.baseline):
        name = "baseline" if i == 0 else Path(baseline).name[:16]
        variants.insert(i, Variant(name, Path(baseline).resolve(), {}))
    variants += [parse_env(spec) for spec in args.env]
    if args.probe is not None:
        args.probe.mkdir(parents=True, exist_ok=True)
        for variant in variants:
            variant.env = {
                "CK_MEMPROBE_DIR": str(args.probe.resolve()),
                "CK_MEMPROBE_INTERVAL": str(args.probe_interval),
                "PYTHONPATH": f"{PROBE}:{variant.root}",
                **variant.env,
            }
    print(f"machine: {os.cpu_count()} CPUs; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="celkeeper-bench-pod-") as tmp:
        work = Path(tmp)
        write_policies(work / "policies")
        write_namespaces(work / "namespaces.yaml")
        (work / "allowed.json").write_text(json.dumps(review(bench_pod(), uid="bench-allowed")))
        (work / "denied.json").write_text(json.dumps(review(denied_pod(), uid="bench-denied")))
        with contextlib.ExitStack() as stack:
            cluster = None
            if args.source == "kubernetes":
                cluster = stack.enter_context(control_plane(work, not args.no_gatekeeper_crds))
            results = []
            for round_ in range(args.rounds):
                for variant in variants:
                    name = variant.name if round_ == 0 else f"{variant.name} #{round_ + 1}"
                    measured = measure(variant, work, args, cluster)
                    results.append((Variant(name, variant.root, variant.env), measured))
    print()
    print(
        f"PSS in MiB after {args.reviews:,} reviews or more and {args.settle:g} s, --workers {args.workers}, "
        f"source {args.source}"
    )
    print(f"{'server':<16} {'process':<9} {'total':>7}" + "".join(f" {p:>8}" for p in PARTS))
    for variant, (rows, _rate, _cpu) in results:
        for role, _pid, memory in rows:
            print(
                f"{variant.name:<16} {role:<9} {memory.total:7.1f}"
                + "".join(f" {memory.parts[p]:8.1f}" for p in PARTS)
            )
        total = sum(m.total for _, _, m in rows)
        print(f"{variant.name:<16} {'pod':<9} {total:7.1f}  (issue 29: <= 200)")
    if args.probe is not None:
        print_probe(args.probe)
    return 0


#: probe figures that are counts, not bytes
_COUNTS = frozenset(
    ("malloc.pyblocks", "go.gcPercent", "go.collections", "go.goroutines", "go.handles", "go.memoryLimit")
)


def _flat(record: dict[str, object]) -> dict[str, float]:
    """A probe sample's figures, one level: `part.key` -> value (MiB: smaps' are, bytes are converted;
    counts as they are)."""
    flat: dict[str, float] = {}
    for part in ("smaps", "malloc", "pymalloc", "go"):
        figures = record.get(part)
        if not isinstance(figures, dict):
            continue
        for key, value in figures.items():
            name = f"{part}.{key}"
            if not isinstance(value, (int, float)):
                continue
            is_bytes = part in ("malloc", "go") or "bytes" in key
            flat[name] = value / 2**20 if is_bytes and part != "smaps" and name not in _COUNTS else value
    py = record.get("py")
    if isinstance(py, dict):
        flat["py.tracked"] = py.get("tracked", 0)
    for key in ("threads", "fds"):
        value = record.get(key)
        if isinstance(value, (int, float)):
            flat[key] = value
    return flat


def print_probe(folder: Path) -> None:
    """Each probed process's second sample (after the server's start) and its last, side by side: the
    figures that moved; then its last growth by line (tracemalloc) and most common types."""
    for path in sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if len(records) < 3:
            continue
        first, last = records[1], records[-1]
        seconds = last["t"] - first["t"]
        argv = " ".join(first["argv"])
        print(f"\nprobe {path.stem} {argv}: {len(records)} samples, {seconds:,.0f} s apart")
        a, b = _flat(first), _flat(last)
        for key in sorted(set(a) | set(b)):
            before, after = a.get(key, 0.0), b.get(key, 0.0)
            if abs(after - before) >= 0.05:
                print(f"  {key:<34} {before:12.2f} -> {after:12.2f}  ({after - before:+.2f})")
        py = last.get("py") or {}
        for line in py.get("growth", [])[:10]:
            print(f"  + {line}")
        typed = next((r["py"]["types"] for r in reversed(records) if "types" in r.get("py", {})), None)
        if typed:
            print("  types: " + ", ".join(f"{name} {count}" for name, count in typed[:15]))


if __name__ == "__main__":
    raise SystemExit(main())
