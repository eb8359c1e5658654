"""The floor of a `celkeeper verify` run beside the run itself and `gator verify`: what any run pays before
its first Suite (Python's start, the imports a `verify` makes, the native library loaded with its two
compilers warm, a `verify --no-cache` of an empty folder), each a fresh process, alternated for --rounds
rounds; the median wall and CPU time (user + system, of the process and its threads) of each. The library
is bench/verify.py's (examples/ and the Gatekeeper library samples, with Gatekeeper's API groups). Needs
the gator binary (hack/gator/build.sh, built by ./dev test).

    .venv/bin/python bench/verify_floor.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.verify import _ENV, _timed  # noqa: E402
from tests.e2e.gator.conftest import SUITE_ROOTS, gatekeeper_copy  # noqa: E402
from tests.support.gator import GatorUnavailable, find_gator  # noqa: E402

_IMPORTS = (
    "import celkeeper.cli.main, celkeeper.cli.verify, celkeeper.gator.backend, celkeeper.gator.verdicts,"
    " celkeeper.cel.celgo.engine"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    try:
        gator = find_gator()
    except GatorUnavailable as exc:
        print(f"verify_floor: skipped: {exc}")
        return
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        library, empty = Path(tmp) / "library", Path(tmp) / "empty"
        library.mkdir()
        empty.mkdir()
        for name in ("examples", "library"):
            if SUITE_ROOTS[name].is_dir():
                gatekeeper_copy(SUITE_ROOTS[name], library / name)
        runs = {
            "python -c pass": [py, "-c", "pass"],
            "python -I -S -c pass": [py, "-I", "-S", "-c", "pass"],
            "the imports of a verify": [py, "-c", _IMPORTS],
            "the library, two compilers warm": [
                py,
                "-c",
                "from celkeeper.native.ffi import load; load().compilers(2)",
            ],
            "verify --no-cache, an empty folder": [py, "-m", "celkeeper", "verify", "--no-cache", str(empty)],
            "verify --no-cache, the suites": [
                py,
                "-m",
                "celkeeper",
                "verify",
                "--no-cache",
                "-v",
                f"{library}/...",
            ],
            "gator verify, the suites": [str(gator), "verify", "-v", f"{library}/..."],
        }
        for argv in runs.values():  # warm the page and bytecode caches
            _timed(argv, _ENV)
        timed: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, argv in runs.items():
                timed[name].append(_timed(argv, _ENV)[:2])
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'median of ' + str(args.rounds):36}    wall       cpu")
    for name, values in timed.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        print(f"{name:36} {wall * 1000:6.0f} ms {cpu * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
