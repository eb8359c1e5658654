#!/usr/bin/env python3
"""Memory per constraint in a webhook worker (issue 12: target <= 20 KB per constraint at 10,000).

For each configuration a fresh process loads a policy set exactly as a worker does (the informer's
folder listing, the worker's DocumentCache, build_policy_set with its TemplateCompiler, prepare()
when the engine has it, gc.freeze()) and reports its resident memory (VmRSS) and the load time. The
policy sets are the 19 example templates with N constraints (copies of the examples' constraints,
tests/support/policysets.py); "distinct" gives each copy parameters of its own where the template's
schema allows it (real constraints differ), which defeats sharing by equal parameters. Per
constraint = (RSS with N constraints - RSS with the templates alone) / N.

    .venv/bin/python bench/memory.py [--constraints 1000 10000] [--engine NAME]

Bounded: one process per configuration, at most the largest N constraints (10,000 by default).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.policysets import large_policy_set  # noqa: E402

CHILD = r"""
import gc, json, re, sys, time
from pathlib import Path
from celkeeper.informer import FolderSource
from celkeeper.settings import Settings
from celkeeper.snapshot.documents import DocumentCache
from celkeeper.cel import get_engine
from celkeeper.policy import TemplateCompiler, build_policy_set

def rss():
    return int(re.search(r"VmRSS:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024

folder, engine_name, no_prepare = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
settings = Settings(engine=engine_name) if engine_name else Settings()
engine = get_engine(settings.engine, settings.limits)
before = rss()
started = time.perf_counter()
listing = FolderSource(folder).listing()
parsed = DocumentCache().policy_documents(listing.items)
policies = build_policy_set(parsed.documents, TemplateCompiler(engine))
prepare = None if no_prepare else getattr(policies, "prepare", None)
plans = prepare() if prepare is not None else 0
took = time.perf_counter() - started
del listing
gc.collect()
gc.freeze()
print(json.dumps({"rss": rss(), "before": before, "seconds": took, "constraints": len(policies.constraints),
                  "errors": len(policies.errors), "plans": plans, "engine": settings.engine}))
"""


def measure(folder: Path, engine: str, no_prepare: bool = False) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), engine, "1" if no_prepare else "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench: the loading process failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--constraints", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--engine", default="", help="CEL engine (default: celkeeper's default)")
    parser.add_argument(
        "--no-prepare",
        action="store_true",
        help="leave out the engine's prepared evaluation plans (what the rest costs)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="celkeeper-bench-memory-") as tmp:
        base_dir = Path(tmp) / "templates-only"
        large_policy_set(base_dir, 0)
        base = measure(base_dir, args.engine, args.no_prepare)
        print(
            f"engine {base['engine']}; a worker with the 19 example templates and no constraint: "
            f"{base['rss'] / 2**20:.1f} MiB RSS"
        )
        print(
            f"  {'constraints':>11}  {'parameters':<10} {'RSS MiB':>8} {'per constraint':>15} {'load s':>7}"
            f" {'plans':>6}"
        )
        for count in args.constraints:
            for distinct in (False, True):
                folder = Path(tmp) / f"{count}-{distinct}"
                large_policy_set(folder, count, distinct=distinct)
                got = measure(folder, args.engine, args.no_prepare)
                if got["constraints"] != count or got["errors"]:
                    raise SystemExit(f"bench: expected {count} constraints without errors, got {got}")
                per = (got["rss"] - base["rss"]) / count / 1024
                print(
                    f"  {count:>11,}  {'distinct' if distinct else 'shared':<10} {got['rss'] / 2**20:>8.1f}"
                    f" {per:>12.1f} KB {got['seconds']:>7.1f} {int(got['plans']):>6}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
