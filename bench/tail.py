#!/usr/bin/env python3
"""Where the webhook's tail latency comes from: the open loop's p99 against the server's own timing.

bench/webhook.py's workload (its ~4.7 KB Pod review, 20 Pod constraints of 12 templates; folder
source, one worker with the server's default event loops) is sent by wrk in an open loop at --rate
reviews/s (paced per wrk thread, as bench/webhook.py and bench/gatekeeper.py measure p99) for
--duration seconds. For each configuration, alternated --rounds times, it prints:
  - the client's p50 and p99 (wrk: from a request's send to its answer);
  - the server's own timing of the same reviews (its `celkeeper_admission_request_duration_seconds`
    histogram, from the body read to the answer built): the share over 1, 2, 5 and 10 ms. What the
    client sees beyond it waited outside the handler: on its connection's event loop, for a core, in
    TLS and HTTP;
  - server CPU per review and the time per review its threads were runnable but waited for a CPU;
  - the Go runtime's collections over the measurement (`GODEBUG=gctrace=1`, the worker's log): how
    many (and per 1,000 reviews: what a loaded machine moves least), how long their mark phases lasted
    (wall) and the share of the time spent in one. The log
    is the server's: the informer's collections are in it too (it collects after a round that
    compiled, which an unchanged policy folder does not cause during a measurement).

A configuration is a set of environment variables for the server (`--env nogc:GOGC=off`; the first
one is always the server as it ships, `default`): e.g. Go's collector switched off shows what the
collections add to the tail, `GOMAXPROCS=4` whether the Go runtime's processors are short, and
`CELKEEPER_NATIVE_LIB=PATH` another build of the native library (e.g. main's, copied from
~/.cache/celkeeper-native/) beside this one. `--serve NAME:OPTIONS` is a configuration of `celkeeper
serve` options instead (e.g. `--serve "loops3:--threads 3"`, `--serve "w2:--workers 2 --threads 1"`:
other process models on the same cores).

With --mutate the reviews go to /v1/mutate, the folder holding bench/mutation.py's ten mutators too
(all of them match and change the Pod; the server times its mutating reviews in the same histogram).

    .venv/bin/python bench/tail.py [--rate 1000] [--duration 10] [--rounds 2] [--mutate]
                                   [--env NAME:VAR=VALUE,... ...] [--serve NAME:OPTIONS ...]

On a shared machine the tail moves with everything else that runs (compare configurations within one
run only; say the load). Needs wrk (`apt-get install -y wrk`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import ssl
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import NamedTuple

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.mutation import mutators  # noqa: E402
from bench.support.load import Result, run_wrk  # noqa: E402
from bench.support.variants import add_env_option, env_variant  # noqa: E402
from bench.webhook import bench_pod, folder_serve_args, write_namespaces, write_policies  # noqa: E402
from tests.support.serve import ServeProcess, review  # noqa: E402

#: the server's latency histogram's bounds this prints the share of reviews above (seconds)
BOUNDS = ("0.001", "0.002", "0.005", "0.01")
_BUCKET = re.compile(r'celkeeper_admission_request_duration_seconds_bucket\{[^}]*le="([^"]+)"[^}]*\} (\S+)')
# gc 35 @10.561s 1%: 0.091+12+0.12 ms clock, ...
_GC = re.compile(r"^gc \d+ @([\d.]+)s \d+%: ([\d.]+)\+([\d.]+)\+([\d.]+) ms clock", re.MULTILINE)


def buckets(server: ServeProcess) -> dict[str, float]:
    """The latency histogram's cumulative counts by upper bound, summed over its label sets."""
    context = ssl.create_default_context(cafile=str(server.certs.ca_cert))
    with urllib.request.urlopen(server.url("/metrics"), context=context, timeout=10) as answer:
        text = answer.read().decode()
    counts: dict[str, float] = {}
    for bound, count in _BUCKET.findall(text):
        counts[bound] = counts.get(bound, 0.0) + float(count)
    return counts


def collections(log: str, after: float) -> list[tuple[float, float]]:
    """The Go collections logged by gctrace after `after` seconds (the runtime's clock): (when, mark ms)."""
    return [(float(at), float(mark)) for at, _, mark, _ in _GC.findall(log) if float(at) > after]


class Config(NamedTuple):
    """One server configuration: its environment variables and its extra `celkeeper serve` options."""

    name: str
    env: dict[str, str]
    options: tuple[str, ...] = ()

    @property
    def workers(self) -> int:
        """Its worker processes (`--workers`; one unless its options say otherwise)."""
        parser = argparse.ArgumentParser(add_help=False)
        parser.add_argument("--workers", type=int, default=1)
        return int(parser.parse_known_args(self.options)[0].workers)


def serve_config(spec: str) -> Config:
    """`NAME:OPTIONS` -> the Config running `celkeeper serve` with those options (split as a shell
    would); a malformed spec ends the benchmark."""
    name, _, options = spec.partition(":")
    words = tuple(shlex.split(options))
    if not name or not words:
        raise SystemExit(f"bench: --serve {spec!r}: expected NAME:OPTIONS (e.g. 'loops3:--threads 3')")
    return Config(name, {}, words)


def measure(
    work: Path, policies: Path, body: Path, config: Config, rate: float, duration: int, route: str
) -> tuple[Result, dict[str, float], list[tuple[float, float]]]:
    server = ServeProcess(
        work / "server",
        policies,
        workers=config.workers,
        args=[*folder_serve_args(work), *config.options],
        env={"GODEBUG": "gctrace=1", **config.env},
    )
    server.start()
    try:
        pids = server.worker_pids()
        run_wrk(server.url(route), body, work, 3, 8, 1, None, pids)  # warm up
        log_before = (work / "server" / "serve.log").read_text(errors="replace")
        start = max((at for at, _ in collections(log_before, 0.0)), default=0.0)
        before = buckets(server)
        result = run_wrk(server.url(route), body, work, duration, 8, 1, rate, pids)
        after = buckets(server)
        log = (work / "server" / "serve.log").read_text(errors="replace")
        gcs = collections(log, start)
    finally:
        server.stop()
        shutil.rmtree(work / "server", ignore_errors=True)
    total = after["+Inf"] - before["+Inf"]
    over = {b: 1.0 - (after[b] - before[b]) / total if total else 0.0 for b in BOUNDS}
    return result, over, gcs


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=1000.0, help="open-loop reviews/s (default 1000)")
    parser.add_argument("--duration", type=int, default=10, help="seconds per measurement (default 10)")
    parser.add_argument(
        "--rounds", type=int, default=2, help="alternations of the configurations (default 2)"
    )
    parser.add_argument(
        "--mutate", action="store_true", help="send the reviews to /v1/mutate (bench/mutation.py's mutators)"
    )
    add_env_option(parser)
    parser.add_argument(
        "--serve",
        action="append",
        default=[],
        metavar="NAME:OPTIONS",
        help="also measure the server with these `celkeeper serve` options (repeatable)",
    )
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("bench/tail.py needs wrk (apt-get install -y wrk)")
    configs = [Config("default", {})]
    configs += [Config(*env_variant(spec)) for spec in args.env]
    configs += [serve_config(spec) for spec in args.serve]
    print(f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
    print(
        f"{'/v1/mutate' if args.mutate else '/v1/admit'}: open loop at {args.rate:.0f}/s for "
        f"{args.duration} s, wrk 1 thread 8 connections; {args.rounds} round(s), configurations alternated"
    )
    header = (
        f"{'configuration':<24} {'rate':>6} {'p50 ms':>7} {'p99 ms':>7} | server over "
        + " ".join(f"{float(b) * 1e3:g}ms".rjust(6) for b in BOUNDS)
        + f" | {'CPU/review':>10} {'runq wait':>10} | Go collections: n, mark ms (max), time in mark"
    )
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory(prefix="celkeeper-tail-") as tmp:
        work = Path(tmp)
        write_policies(work / "policies")
        write_namespaces(work / "namespaces.yaml")
        route = "/v1/admit"
        if args.mutate:
            route = "/v1/mutate"
            (work / "policies" / "mutators.yaml").write_text(yaml.safe_dump_all(mutators()))
        body = work / "review.json"
        body.write_text(json.dumps(review(bench_pod(), uid="tail-0001")))
        for round_ in range(args.rounds):
            for config in configs:
                result, over, gcs = measure(
                    work, work / "policies", body, config, args.rate, args.duration, route
                )
                per = result.requests or 1
                wait = sum(result.server_wait)
                marks = [mark for _, mark in gcs]
                in_mark = sum(marks) / 1e3 / args.duration
                gc_text = (
                    f"{len(gcs)} ({len(gcs) / per * 1e3:.2f} per 1,000 reviews), "
                    f"{sum(marks) / len(marks):.1f} ({max(marks):.1f}), {in_mark:.1%}"
                    if gcs
                    else "none"
                )
                print(
                    f"{config.name:<24} {result.rate:>6.0f} "
                    + f"{result.p50 * 1e3:>7.2f} {result.p99 * 1e3:>7.2f} | "
                    + " ".join(f"{over[b]:>6.2%}" for b in BOUNDS)
                    + f" | {result.server_cpu / per * 1e6:>7.0f} µs {wait / per * 1e6:>7.0f} µs"
                    + f" | {gc_text}",
                    flush=True,
                )
            print(
                f"round {round_ + 1} of {args.rounds} done; load average {os.getloadavg()[0]:.2f}", flush=True
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
