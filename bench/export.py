#!/usr/bin/env python3
"""What the decision export (`celkeeper serve --export-decisions FILE --export-allowed`) costs the webhook,
and that a blocked output never delays a review.

bench/webhook.py's workload (a Deployment's Pod reviewed against 20 Pod constraints, 2 Gunicorn workers over
loopback HTTPS), served by three servers that differ only in the export: without it; writing every
decision to a file (each allowed review one line; each denied review one line per violation); and
exporting to a FIFO nobody reads (the output blocked: after the first few MiB every line is dropped and
counted). They are measured alternately, `--rounds` times, with `wrk` (Debian package `wrk`; without it,
bench/webhook.py's Python client, which on 2 cores is itself the bottleneck):
  - open loop at each of `--rates` reviews/s (default 2,000 and 1,000; where the machine cannot reach a
    rate, the rate reached is printed: the server is then saturated and the p99 is its queue), the
    allowed review, then the denied one;
  - closed loop (saturation), the denied review (--no-closed leaves it out).
Printed per mode: reviews/s, p50, p99, server CPU per review (the workers' CPU time, their export threads
included, over the reviews answered); at the end, per mode, the ratio of the CPU per review export / no
export (the bar: <= 1.05) and blocked / no export, each round's and their median (the machine's speed
drifts between rounds), with the worst p99 of each server; and the lines each exporting server wrote and
dropped (its /metrics).

    .venv/bin/python bench/export.py [--duration 10] [--rounds 2] [--rates 2000,1000] [--connections 8]
                                [--no-closed]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.support.load import Result, run_python, run_wrk  # noqa: E402
from bench.webhook import (  # noqa: E402
    bench_pod,
    denied_pod,
    folder_serve_args,
    write_namespaces,
    write_policies,
)
from celkeeper.model import Action  # noqa: E402
from celkeeper.model import Result as Violation  # noqa: E402
from celkeeper.webhook.export import DecisionExport  # noqa: E402
from tests.support.serve import ServeProcess, review  # noqa: E402


def export_lines(server: ServeProcess) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in server.get("/metrics").text.splitlines():
        if line.startswith("celkeeper_decision_export_lines_total{"):
            result = line.split('result="', 1)[1].split('"', 1)[0]
            found[result] = float(line.split()[-1])
    return found


def request_path_cost(
    bodies: dict[str, dict[str, Any]], answer: dict[str, Any], decisions: int = 20_000
) -> dict[str, tuple[float, float]]:
    """In process, writing to /dev/null: CPU seconds per review that `DecisionExport.decision` costs the
    request's thread, and the whole process (the writer thread included), for the allowed review (one
    line) and the denied one (the server's violations: one line each)."""
    results: list[Violation] = []
    for action, lines in (
        (Action.DENY, answer["response"]["status"]["message"].splitlines()),
        (Action.WARN, answer["response"].get("warnings") or []),
    ):
        for line in lines:
            name, _, message = line.removeprefix("[").partition("] ")
            results.append(Violation("BenchConstraint", name, action, message))
    cost = {}
    cases: tuple[tuple[str, list[Violation]], ...] = (("allowed", []), ("denied", results))
    for name, found in cases:
        raw = bodies[name]["request"]
        export = DecisionExport(os.devnull, allowed=True)
        thread0, process0 = time.thread_time(), time.process_time()
        for _ in range(decisions):
            export.decision(raw, found, allowed=not found, policies=None)
        thread1 = time.thread_time()
        export.close()
        cost[name] = ((thread1 - thread0) / decisions, (time.process_time() - process0) / decisions)
    return cost


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=int, default=10, help="seconds per measurement (default 10)")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the servers (default 2)")
    parser.add_argument(
        "--rates", default="2000,1000", help="open-loop reviews/s, comma-separated (default 2000,1000)"
    )
    parser.add_argument("--connections", type=int, default=8, help="concurrent connections (default 8)")
    parser.add_argument("--workers", type=int, default=2, help="Gunicorn workers (default 2)")
    parser.add_argument(
        "--no-closed", dest="closed", action="store_false", help="leave out the closed loop (saturation)"
    )
    args = parser.parse_args()
    rates = [float(rate) for rate in args.rates.split(",") if rate.strip()]
    wrk = shutil.which("wrk")
    if not wrk:
        print("load generator: Python threads (wrk not found; `apt-get install -y wrk` for a lighter client)")
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="celkeeper-bench-export-") as tmp:
        work = Path(tmp)
        write_policies(work / "policies")
        write_namespaces(work / "namespaces.yaml")
        bodies = {
            "allowed": review(bench_pod(), uid="bench-allowed"),
            "denied": review(denied_pod(), uid="bench-denied"),
        }
        files = {}
        for name, document in bodies.items():
            files[name] = work / f"{name}.json"
            files[name].write_text(json.dumps(document))
        exported = work / "decisions.jsonl"
        fifo = work / "decisions.fifo"
        os.mkfifo(fifo)
        # the FIFO's reader: open (a writer's open would wait for one), never read; the pipe fills, and the
        # export's writer threads block in write()
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        common = folder_serve_args(work)
        servers = {
            "no export": ServeProcess(work / "off", work / "policies", workers=args.workers, args=common),
            "export": ServeProcess(
                work / "on",
                work / "policies",
                workers=args.workers,
                args=[*common, "--export-decisions", str(exported), "--export-allowed"],
            ),
            "blocked": ServeProcess(
                work / "blocked",
                work / "policies",
                workers=args.workers,
                args=[*common, "--export-decisions", str(fifo), "--export-allowed"],
            ),
        }
        for server in servers.values():
            server.start()
        try:
            _, answer = servers["export"].admit(bodies["denied"])
            lines_per_denied = len(answer["response"]["status"]["message"].splitlines()) + len(
                answer["response"].get("warnings") or []
            )
            print(
                f"workload: 20 Pod constraints, {args.workers} workers; an allowed review exports 1 line, "
                f"a denied one {lines_per_denied}+ (one per violation); {args.duration} s per measurement"
            )
            for name, (thread, process) in request_path_cost(bodies, answer).items():
                print(
                    f"in process, {name} review: the export costs the request's thread "
                    f"{thread * 1e6:.1f} µs, the process (its writer thread included) {process * 1e6:.1f} µs"
                )
            modes: list[tuple[str, str, float | None]] = [
                *((f"allowed, open {rate:.0f}/s", "allowed", rate) for rate in rates),
                *((f"denied, open {rate:.0f}/s", "denied", rate) for rate in rates),
                *([(f"denied, closed {args.connections}", "denied", None)] if args.closed else []),
            ]
            figures: dict[tuple[str, str], list[Result]] = {}
            columns = ("reviews/s", "p50 ms", "p99 ms", "CPU/review", "load")
            header = f"{'mode':<24} {'server':<10} " + " ".join(
                f"{c:>{w}}" for c, w in zip(columns, (10, 8, 8, 12, 6), strict=True)
            )
            print(header)
            print("-" * len(header))

            def measure(server: ServeProcess, body: str, rate: float | None, duration: int) -> Result:
                if wrk:
                    return run_wrk(
                        server.url("/v1/admit"),
                        files[body],
                        work,
                        duration,
                        args.connections,
                        1,
                        rate,
                        server.worker_pids(),
                    )
                data = files[body].read_bytes()
                ca = server.certs.ca_cert
                pids = server.worker_pids()
                return run_python("localhost", server.port, data, ca, duration, args.connections, rate, pids)

            for server in servers.values():  # warm up: connections, caches, CPU frequency
                measure(server, "denied", None, 3)

            for round_ in range(args.rounds):
                for mode, body, rate in modes:
                    order = list(servers.items())
                    if round_ % 2:  # every other round in the reverse order: none always goes first
                        order.reverse()
                    for name, server in order:
                        result = measure(server, body, rate, args.duration)
                        figures.setdefault((mode, name), []).append(result)
                        per = result.server_cpu / max(result.requests, 1)
                        print(
                            f"{mode:<24} {name:<10} {result.rate:>10.0f} {result.p50 * 1e3:>8.2f} "
                            f"{result.p99 * 1e3:>8.2f} {per * 1e6:>9.0f} µs {os.getloadavg()[0]:>6.2f}"
                        )
            print()
            print(
                "server CPU per review, export / no export (the bar: <= 1.05) and blocked output / no export "
                "(over the rounds; each round's ratio and their median: the machine's speed drifts between "
                "rounds), worst p99"
            )

            def per_review(name: str, mode: str) -> float:
                runs = figures[(mode, name)]
                return sum(r.server_cpu for r in runs) / max(sum(r.requests for r in runs), 1)

            def worst_p99(name: str, mode: str) -> float:
                return max(r.p99 for r in figures[(mode, name)]) * 1e3

            def ratios(name: str, mode: str) -> list[float]:
                pairs = zip(figures[(mode, name)], figures[(mode, "no export")], strict=True)
                return [
                    (r.server_cpu / max(r.requests, 1)) / (o.server_cpu / max(o.requests, 1))
                    for r, o in pairs
                ]

            def rounds(name: str, mode: str) -> str:
                found = ratios(name, mode)
                listed = ", ".join(f"{ratio:.3f}" for ratio in found)
                return f"{listed}; median {statistics.median(found):.3f}"

            for mode, _, _ in modes:
                off = per_review("no export", mode)
                on = per_review("export", mode)
                blocked = per_review("blocked", mode)
                print(
                    f"  {mode:<24} export {on * 1e6:.0f} / {off * 1e6:.0f} µs = {on / off:.3f} (rounds: "
                    f"{rounds('export', mode)}); blocked {blocked * 1e6:.0f} µs = {blocked / off:.3f} "
                    f"(rounds: {rounds('blocked', mode)})"
                )
                print(
                    f"  {'':<24} worst p99: no export {worst_p99('no export', mode):.2f} ms, export "
                    f"{worst_p99('export', mode):.2f} ms, blocked {worst_p99('blocked', mode):.2f} ms"
                )
            size = exported.stat().st_size if exported.exists() else 0
            for name in ("export", "blocked"):
                counts = export_lines(servers[name])
                where = f"to the file ({size / 2**20:.0f} MiB)" if name == "export" else "to the blocked FIFO"
                print(
                    f"{name}: {counts.get('written', 0):.0f} lines written {where}, "
                    f"{counts.get('dropped', 0):.0f} dropped, {counts.get('failed', 0):.0f} failed"
                )
        finally:
            os.close(reader)  # the blocked writers' writes fail (EPIPE) and the servers stop at once
            for server in servers.values():
                server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
