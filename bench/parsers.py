#!/usr/bin/env python3
"""The Kubernetes library parsers on adversarial input (issue 12: linear time).

For each parser (quantity, semver, url, ip/cidr, every named format) the adversarial inputs of
tests/cel/k8slib/test_linear.py at 10 KB and 100 KB: the slowest input's time at each size and
their ratio (about 10 for linear time, about 100 for quadratic). Each parser runs in a child process
with a CPU-time limit per input, so a super-linear parser is reported (as "> limit") instead of
hanging the benchmark.

    .venv/bin/python bench/parsers.py [--limit 10]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cel.k8slib.test_linear import PARSERS, _patterns  # noqa: E402


def _run(parser: str, size: int, limit: float, out: object) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (int(limit * len(_patterns(0))) + 1, resource.RLIM_INFINITY))
    fn = PARSERS[parser]
    worst, which = 0.0, ""
    for name, text in _patterns(size).items():
        took = float("inf")
        for _ in range(3):  # the best of three: the machine may be shared
            start = time.process_time()
            with contextlib.suppress(Exception):  # errors are answers here; only the time counts
                fn(text)
            took = min(took, time.process_time() - start)
        if took > worst:
            worst, which = took, name
    out.send((worst, which))  # type: ignore[attr-defined]


def measure(parser: str, size: int, limit: float) -> tuple[float, str]:
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_run, args=(parser, size, limit, send), daemon=True)
    child.start()
    send.close()
    got = (
        receive.recv() if receive.poll(limit * len(_patterns(0)) + 5) else (float("inf"), "(over the limit)")
    )
    if child.is_alive():
        child.kill()
    child.join()
    return got


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=float, default=10.0, help="CPU seconds per input before giving up")
    args = parser.parse_args()
    print(f"{'parser':<32} {'10 KB ms':>9} {'100 KB ms':>10} {'ratio':>6}  slowest input at 100 KB")
    for name in sorted(PARSERS):
        small, _ = measure(name, 10_000, args.limit)
        large, which = measure(name, 100_000, args.limit)
        ratio = large / small if small > 0 and large != float("inf") else float("nan")
        big = f"> {args.limit * 1000:.0f}" if large == float("inf") else f"{large * 1000:.1f}"
        print(f"{name:<32} {small * 1000:>9.1f} {big:>10} {ratio:>6.1f}  {which}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
