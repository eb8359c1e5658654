"""`celkeeper verify` against `gator verify` (Gatekeeper v3.23.1, hack/gator) on the same library of Suites.

The library: every Suite of examples/ and of the Gatekeeper library samples (when present), copied
with celkeeper's API groups spelled as Gatekeeper's (gator knows only those). Each tool runs as a user
runs it, a fresh process per run (`celkeeper verify DIR/...` with Python's start-up and imports
included; `gator verify DIR/...`); the median wall time and the median CPU time (user + system, of
the process and its threads: what a loaded machine does not inflate as much as wall time) of
--rounds runs are printed for both, and the ratios from the same run. celkeeper runs with its
bytecode cached (as an installed package has it: PYTHONDONTWRITEBYTECODE is dropped for its runs),
with its disk cache of parameter-check verdicts (filled by the first, untimed, run; as a user's second
run has it) and without it (`--no-cache`: a first run, or changed policies).
The issue's library of 16 templates and 131 cases is not in the samples: this measures the Suites
that exist (examples/ and ../shared/samples) and prints their counts. Both must give the same
verdicts (tests/e2e/gator proves it case by case); this only times them. Needs the gator binary
(hack/gator/build.sh, built by ./dev test).

    .venv/bin/python bench/verify.py [--rounds N] [--engine NAME] [--baseline DIR]
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

from tests.e2e.gator.conftest import SUITE_ROOTS, gatekeeper_copy  # noqa: E402
from tests.support.gator import GatorUnavailable, find_gator, gatekeeper_version  # noqa: E402

#: celkeeper's runs keep Python's bytecode cache, as an installed package does
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall time, CPU time (user + system) and stdout of one run, in a folder holding no package (so
    that `python -m celkeeper` imports the installed one, or the one PYTHONPATH names)."""
    cpu, start = _cpu(), time.perf_counter()
    done = subprocess.run(
        argv, capture_output=True, text=True, check=False, env=env, cwd=tempfile.gettempdir()
    )
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed, _cpu() - cpu, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--engine", default=None, help="celkeeper's engine (default: its default)")
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="also time the celkeeper package of another checkout (e.g. `git archive main | tar -x -C DIR`),"
        " interleaved in the same run: before/after figures",
    )
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
        tools = {
            f"gator verify (Gatekeeper v{gatekeeper_version()})": ([str(gator), "verify", "-v", target], _ENV)
        }
        if args.baseline:
            baseline = str(Path(args.baseline).resolve())
            # a cache of its own: each version's run would prune the other's (gator/verdicts.py)
            where = _ENV | {"PYTHONPATH": baseline, "CELKEEPER_CACHE_DIR": str(Path(tmp) / "cache-baseline")}
            tools["baseline verify --no-cache"] = ([*ours, "--no-cache"], where)
            tools["baseline verify"] = (ours, where)
        tools["celkeeper verify --no-cache"] = ([*ours, "--no-cache"], _ENV)
        tools["celkeeper verify"] = (ours, _ENV)  # its disk cache filled by the warm-up run
        outputs = [_timed(*tool)[2] for tool in tools.values()]  # warm the page and bytecode caches
        templates = len({p for p in library.rglob("*.yaml") if "kind: ConstraintTemplate" in p.read_text()})
        cases = len(re.findall(r"^    --- (?:PASS|FAIL): ", outputs[-1], re.M))
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in tools}
        for _ in range(args.rounds):  # interleaved, so that load from elsewhere hits all alike
            for name, tool in tools.items():
                runs[name].append(_timed(*tool)[:2])
    print(f"library: {templates} templates, {cases} cases (examples/ and the gatekeeper-library samples)")
    print(f"{'median of ' + str(args.rounds):{_WIDTH}}     wall        cpu   gator / this: wall, cpu")
    medians = {name: [statistics.median(r[i] for r in timed) for i in (0, 1)] for name, timed in runs.items()}
    gator_wall, gator_cpu = next(iter(medians.values()))
    for name, (wall, cpu) in medians.items():
        ratios = f"{gator_wall / wall:.2f}x, {gator_cpu / cpu:.2f}x"
        print(f"{name:{_WIDTH}} {wall * 1000:7.0f} ms {cpu * 1000:7.0f} ms   {ratios}")
    if args.baseline:
        print(f"baseline: the celkeeper package at {baseline}")
    print("(gator / this above 1: faster than gator)")


_WIDTH = 40


if __name__ == "__main__":
    main()
