#!/usr/bin/env python3
"""Real requests while idle and slow clients hold connections (issue 12).

`celkeeper serve` with 2 workers on the example policies, over loopback HTTPS. First the latency of
real admission reviews with nobody else connected; then, for each phase a client can stall in (TCP
connected, 6 bytes of a ClientHello, TLS done, partial headers, slow body), on a fresh server: a
crowd of 500 such connections is opened and kept (what the server closes is reopened; slow ones get
a byte every second) while reviews are sent, one after the other, on a new connection each (TLS
handshake included) and, at the same time, on one kept-alive connection. Prints p50, p99 and max
per series, how many reviews failed (a timeout of 5 s, an error or a wrong answer), and how many
stalled connections were held. Bounded: 500 connections, 300 reviews per series, 20 s per phase.

    .venv/bin/python bench/slowclients.py [--connections 500] [--requests 300] [--phases ...]
                                          [--celkeeper DIR]   # serve another source tree (before/after)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.serve import ServeProcess, pod, review  # noqa: E402
from tests.support.slowclients import PHASES, Latencies, SlowCrowd, measure  # noqa: E402

EXAMPLES = ROOT / "examples"
PHASE_SECONDS = 20.0  # reviews are sent for at most this long per phase
DENIED = json.dumps(review(pod(name="web", labels={}))).encode()


def _denied(status: int, body: bytes) -> bool:
    if status != 200:
        return False
    answer = json.loads(body).get("response") or {}
    return answer.get("allowed") is False


def _row(name: str, lat: Latencies) -> str:
    ms = [lat.percentile(p) * 1000 for p in (50, 99, 100)]
    failed = len(lat.failures)
    return f"  {name:<34} p50 {ms[0]:7.1f} ms   p99 {ms[1]:7.1f} ms   max {ms[2]:8.1f} ms   failed {failed}"


def _series(server: ServeProcess, count: int, budget: float) -> tuple[Latencies, Latencies]:
    """The two series at once: a new connection per review, and one kept-alive connection."""
    ctx = server.client_context()
    out: dict[bool, Latencies] = {}

    def run(new: bool) -> None:
        out[new] = measure(
            "127.0.0.1", server.port, ctx, DENIED, _denied, count, new_connections=new, budget=budget
        )

    threads = [threading.Thread(target=run, args=(new,)) for new in (True, False)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out[True], out[False]


def _crowd(server: ServeProcess, phase: str, count: int, stop: Any, out: Any) -> None:
    """(a child process) Hold the crowd until `stop`; send (opened, closed by the server, held samples)."""
    crowd = SlowCrowd("127.0.0.1", server.port, server.client_context(), phase, count)
    done = threading.Event()

    def relay() -> None:  # hold() takes a threading.Event; the parent sets a multiprocessing one
        stop.wait()
        done.set()

    threading.Thread(target=relay, daemon=True).start()
    try:
        crowd.hold(done)
    finally:
        out.send((crowd.opened, crowd.reaped, crowd.held))
        crowd.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=500)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES))
    parser.add_argument(
        "--celkeeper", type=Path, default=ROOT, help="source tree to serve (default: this one)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="celkeeper-bench-slow-"))
    source = args.celkeeper.resolve()

    def start(name: str) -> ServeProcess:
        server = ServeProcess(work / name, EXAMPLES, workers=2, root=source, args=["--max-requests", "0"])
        return server.start(timeout=120)

    try:
        print(
            f"celkeeper serve from {args.celkeeper}, 2 workers; {args.connections} stalled connections per "
            f"phase; {args.requests} reviews per series (a denied Pod, examples/ policies)"
        )
        server = start("quiet")
        try:
            fresh, kept = _series(server, args.requests, PHASE_SECONDS)
        finally:
            server.stop()
        print("nobody else connected")
        print(_row("new connection per review", fresh))
        print(_row("one kept-alive connection", kept))
        for phase in args.phases:
            server = start(phase)  # a fresh server per phase: one phase's damage does not count twice
            # the crowd in a process of its own: its work does not slow the measuring client down
            ctx = multiprocessing.get_context("fork")
            stop = ctx.Event()
            receive, send = ctx.Pipe(duplex=False)
            crowd_args = (server, phase, args.connections, stop, send)
            holder = ctx.Process(target=_crowd, args=crowd_args, daemon=True)
            try:
                holder.start()
                time.sleep(2.0)  # the crowd gathers (a server that does not stall lets it in at once)
                fresh, kept = _series(server, args.requests, PHASE_SECONDS)
            finally:
                stop.set()
                stats = receive.recv() if receive.poll(30) else (0, 0, [0])
                holder.join(10)
                if holder.is_alive():
                    holder.kill()
                server.stop()
            opened, reaped, held = stats
            held = held or [0]
            mean = sum(held) / len(held)
            print(
                f"{phase}: stalled connections held {min(held)}-{max(held)} (mean {mean:.0f}); "
                f"{opened} opened, {reaped} closed by the server"
            )
            print(_row("new connection per review", fresh))
            print(_row("one kept-alive connection", kept))
            for failure in (fresh.failures + kept.failures)[:2]:
                print(f"    e.g. {failure}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
