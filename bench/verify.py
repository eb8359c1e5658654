"""`celkeeper verify` against `gator verify` (Gatekeeper v3.23.1, hack/gator) on the same library of Suites.

The library: every Suite of examples/ and of the Gatekeeper library samples (when present), copied
with celkeeper's API groups spelled as Gatekeeper's (gator knows only those). Each tool runs as a user
runs it, a fresh process per run (`celkeeper verify DIR/...` with Python's start-up and imports
included; `gator verify DIR/...`); the median wall time of --rounds runs is printed for both, and
the ratio from the same run. Both must give the same verdicts (tests/gator proves it case by case);
this only times them. Needs the gator binary (hack/gator/build.sh, built by ./dev test).

    .venv/bin/python bench/verify.py [--rounds N] [--engine NAME]
"""

from __future__ import annotations

import argparse
import re
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


def _timed(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed, done.stdout


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
        _timed(theirs)  # warm the page cache for both
        _, out = _timed(ours)
        templates = len({p for p in library.rglob("*.yaml") if "kind: ConstraintTemplate" in p.read_text()})
        cases = len(re.findall(r"^    --- (?:PASS|FAIL): ", out, re.M))
        gator_times, ours_times = [], []
        for _ in range(args.rounds):  # interleaved, so that load from elsewhere hits both alike
            gator_times.append(_timed(theirs)[0])
            ours_times.append(_timed(ours)[0])
    g, c = statistics.median(gator_times), statistics.median(ours_times)
    print(f"library: {templates} templates, {cases} cases (examples/ and the gatekeeper-library samples)")
    print(f"gator verify (Gatekeeper v{gatekeeper_version()}): {g * 1000:8.0f} ms  (median of {args.rounds})")
    print(f"celkeeper verify:                          {c * 1000:8.0f} ms  (median of {args.rounds})")
    verdict = "faster" if c < g else "slower"
    print(f"celkeeper / gator: {c / g:.2f}x  ({verdict}: gator / celkeeper = {g / c:.2f}x)")


if __name__ == "__main__":
    main()
