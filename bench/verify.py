"""`celkeeper verify` against `gator verify` (Gatekeeper v3.23.1, hack/gator) on the same library of Suites.

The library: every Suite of examples/ and of the Gatekeeper library samples (when present), copied
with celkeeper's API groups spelled as Gatekeeper's (gator knows only those). Each tool runs as a user
runs it, a fresh process per run (`celkeeper verify DIR/...` with Python's start-up and imports
included; `gator verify DIR/...`); the median wall time and the median CPU time (user + system, of
the process and its threads: what a loaded machine does not inflate as much as wall time) of
--rounds runs are printed for both, and the ratios from the same run. celkeeper runs with its
bytecode cached (as an installed package has it: PYTHONDONTWRITEBYTECODE is dropped for its runs).
The issue's library of 16 templates and 131 cases is not in the samples: this measures the Suites
that exist (examples/ and ../shared/samples) and prints their counts. Both must give the same
verdicts (tests/gator proves it case by case); this only times them. Needs the gator binary
(hack/gator/build.sh, built by ./dev test).

    .venv/bin/python bench/verify.py [--rounds N] [--engine NAME]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.gator.conftest import SUITE_ROOTS, gatekeeper_copy  # noqa: E402
from tests.support.gator import GatorUnavailable, find_gator, gatekeeper_version  # noqa: E402

#: celkeeper's runs keep Python's bytecode cache, as an installed package does
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str]) -> tuple[float, float, str]:
    """Wall time, CPU time (user + system) and stdout of one run."""
    cpu, start = _cpu(), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=_ENV)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed, _cpu() - cpu, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--engine", default=None, help="celkeeper's engine (default: its default)")
    args = parser.parse_args()
    try:
        gator = find_gator()
    except GatorUnavailable as exc:
        print(f"verify: skipped: {exc}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        library = Path(tmp) / "library"
        library.mkdir()
        for name in ("examples", "library"):
            if SUITE_ROOTS[name].is_dir():
                gatekeeper_copy(SUITE_ROOTS[name], library / name)
        target = f"{library}/..."
        ours = [sys.executable, "-m", "celkeeper", "verify", "-v", target]
        if args.engine:
            ours += ["--engine", args.engine]
        theirs = [str(gator), "verify", "-v", target]
        _timed(theirs)  # warm the page cache for both (and write celkeeper's bytecode cache)
        out = _timed(ours)[2]
        templates = len({p for p in library.rglob("*.yaml") if "kind: ConstraintTemplate" in p.read_text()})
        cases = len(re.findall(r"^    --- (?:PASS|FAIL): ", out, re.M))
        gator_runs, ours_runs = [], []
        for _ in range(args.rounds):  # interleaved, so that load from elsewhere hits both alike
            gator_runs.append(_timed(theirs)[:2])
            ours_runs.append(_timed(ours)[:2])
    print(f"library: {templates} templates, {cases} cases (examples/ and the gatekeeper-library samples)")
    print(f"median of {args.rounds}:                                wall        cpu")
    g, c = (statistics.median(r[0] for r in runs) for runs in (gator_runs, ours_runs))
    gc, cc = (statistics.median(r[1] for r in runs) for runs in (gator_runs, ours_runs))
    print(f"gator verify (Gatekeeper v{gatekeeper_version()}):   {g * 1000:8.0f} ms {gc * 1000:8.0f} ms")
    print(f"celkeeper verify:                        {c * 1000:8.0f} ms {cc * 1000:8.0f} ms")
    print(f"gator / celkeeper: wall {g / c:.2f}x, cpu {gc / cc:.2f}x  (above 1: celkeeper is faster)")


if __name__ == "__main__":
    main()
