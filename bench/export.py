#!/usr/bin/env python3
"""What the decision export (`celkeeper serve --export-decisions FILE --export-allowed`) costs the webhook.

bench/webhook.py's workload (a Deployment's Pod reviewed against 20 Pod constraints, 2 Gunicorn workers over
loopback HTTPS), served by two servers that differ only in the export: without it, and writing every
decision to a file (each allowed review one line; each denied review one line per violation). They are
measured alternately, `--rounds` times, with `wrk` (Debian package `wrk`; without it, bench/webhook.py's
Python client, which on 2 cores is itself the bottleneck):
  - open loop at `--rate` reviews/s (default 2,000; if the machine cannot reach it, the rate reached is
    printed), the allowed review, then the denied one;
  - closed loop (saturation), the denied review.
Printed per mode: reviews/s, p50, p99, server CPU per review (the workers' CPU time, their export threads
included, over the reviews answered), and at the end the ratio export / no export of the CPU per review
(the bar: <= 1.05), with the lines the export wrote and dropped (its /metrics).

    .venv/bin/python bench/export.py [--duration 10] [--rounds 2] [--rate 2000] [--connections 8]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.support.load import Result, run_python, run_wrk  # noqa: E402
from bench.webhook import bench_pod, denied_pod, write_namespaces, write_policies  # noqa: E402
from tests.support.serve import ServeProcess, review  # noqa: E402


def export_lines(server: ServeProcess) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in server.get("/metrics").text.splitlines():
        if line.startswith("celkeeper_decision_export_lines_total{"):
            result = line.split('result="', 1)[1].split('"', 1)[0]
            found[result] = float(line.split()[-1])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=int, default=10, help="seconds per measurement (default 10)")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two servers (default 2)")
    parser.add_argument("--rate", type=float, default=2000, help="open-loop reviews/s (default 2000)")
    parser.add_argument("--connections", type=int, default=8, help="concurrent connections (default 8)")
    parser.add_argument("--workers", type=int, default=2, help="Gunicorn workers (default 2)")
    args = parser.parse_args()
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
        for name, body in bodies.items():
            files[name] = work / f"{name}.json"
            files[name].write_text(json.dumps(body))
        exported = work / "decisions.jsonl"
        common = [
            "--namespaces",
            str(work / "namespaces.yaml"),
            "--log-level",
            "warning",
            "--max-requests",
            "0",
        ]
        servers = {
            "no export": ServeProcess(work / "off", work / "policies", workers=args.workers, args=common),
            "export": ServeProcess(
                work / "on",
                work / "policies",
                workers=args.workers,
                args=[*common, "--export-decisions", str(exported), "--export-allowed"],
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
            modes = [
                (f"allowed, open {args.rate:.0f}/s", "allowed", args.rate),
                (f"denied, open {args.rate:.0f}/s", "denied", args.rate),
                (f"denied, closed {args.connections}", "denied", None),
            ]
            figures: dict[tuple[str, str], list[Result]] = {}
            columns = ("reviews/s", "p50 ms", "p99 ms", "CPU/review")
            header = f"{'mode':<24} {'server':<10} " + " ".join(
                f"{c:>{w}}" for c, w in zip(columns, (10, 8, 8, 12), strict=True)
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
            for _ in range(args.rounds):
                for mode, body, rate in modes:
                    for name, server in servers.items():
                        result = measure(server, body, rate, args.duration)
                        figures.setdefault((mode, name), []).append(result)
                        per = result.server_cpu / max(result.requests, 1)
                        print(
                            f"{mode:<24} {name:<10} {result.rate:>10.0f} {result.p50 * 1e3:>8.2f} "
                            f"{result.p99 * 1e3:>8.2f} {per * 1e6:>9.0f} µs"
                        )
            print()
            print("server CPU per review, export / no export (mean of the rounds; the bar: <= 1.05)")
            for mode, _, _ in modes:
                with_export = figures[(mode, "export")]
                without = figures[(mode, "no export")]
                on = sum(r.server_cpu for r in with_export) / sum(r.requests for r in with_export)
                off = sum(r.server_cpu for r in without) / sum(r.requests for r in without)
                p99_on = max(r.p99 for r in with_export) * 1e3
                p99_off = max(r.p99 for r in without) * 1e3
                print(
                    f"  {mode:<24} {on * 1e6:>6.0f} µs / {off * 1e6:>6.0f} µs = {on / off:.3f}   "
                    f"(worst p99 {p99_on:.2f} ms / {p99_off:.2f} ms)"
                )
            counts = export_lines(servers["export"])
            size = exported.stat().st_size if exported.exists() else 0
            print(
                f"export: {counts.get('written', 0):.0f} lines written ({size / 2**20:.0f} MiB), "
                f"{counts.get('dropped', 0):.0f} dropped, {counts.get('failed', 0):.0f} failed"
            )
        finally:
            for server in servers.values():
                server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
