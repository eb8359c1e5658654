"""`celkeeper test -f policies/ -f one-manifest.yaml` against `gator test` on the same files: the wall time of
one manifest checked per run, over a folder of manifests, as a CI job or a pre-commit hook runs it.

The policies: the templates and constraints of examples/ (spelled in Gatekeeper's API groups: gator knows
only those). The manifests: every object file of examples/ (`*/objects/*`) and of the Gatekeeper library
samples (when present), and --generated more Pods and Deployments (tests/support/pods.py's realistic Pod).
Each manifest is one pair of runs, in fresh processes, the order alternated from pair to pair (load on the
machine hits both alike): `celkeeper test` as the console script runs it (`python -m celkeeper`, its
bytecode cached as an installed package has it) and `gator test`. Both print the same lines (gator's
format); the script counts the manifests where they differ (none is expected) and prints, per manifest,
the mean and median wall time of each, and the ratio. One untimed run first fills celkeeper's caches (as
a developer's second commit has them); with --cold, each celkeeper run starts from an empty cache
(CELKEEPER_CACHE_DIR in a new folder: a CI job without a cache).

With --baseline DIR (another checkout, e.g. `git archive main | tar -x -C DIR`), its celkeeper runs too
(PYTHONPATH=DIR), a third run in each round, rotated with the others: before/after in one run; --baseline
PROGRAM (a file: e.g. `bin/celkeeper` of a venv main's wheel was installed in) runs that program instead. With
--celkeeper PROGRAM, that program is timed as celkeeper (e.g. `bin/celkeeper` of a venv the wheel was
installed in: an installation as users have it, without the editable install's import hook).

    .venv/bin/python bench/test_startup.py [--rounds 1] [--generated 0] [--cold] [--baseline DIR|PROGRAM]
                                           [--limit N] [--celkeeper PROGRAM]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import samples  # noqa: E402
from tests.support.gator import GatorUnavailable, find_gator  # noqa: E402

_GROUPS = (
    ("templates.celkeeper.io", "templates.gatekeeper.sh"),
    ("constraints.celkeeper.io", "constraints.gatekeeper.sh"),
)
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _gatekeeper_spelling(text: str) -> str:
    for ours, theirs in _GROUPS:
        text = text.replace(ours, theirs)
    return text


def prepare(base: Path, generated: int) -> tuple[Path, list[Path]]:
    policies = base / "policies"
    manifests = base / "manifests"
    policies.mkdir()
    manifests.mkdir()
    for folder in sorted((ROOT / "examples").iterdir()):
        for name in ("template.yaml", "constraint.yaml"):
            if (folder / name).is_file():
                target = policies / f"{folder.name}-{name}"
                target.write_text(_gatekeeper_spelling((folder / name).read_text()))
    sources = sorted((ROOT / "examples").glob("*/objects/*.yaml"))
    if samples.present():
        library = samples.library()
        sources += sorted(
            p
            for p in library.rglob("*.yaml")
            if "samples" in p.parts and p.name not in ("constraint.yaml", "kustomization.yaml")
        )
    found = []
    for index, source in enumerate(sources):
        target = manifests / f"m{index:04d}.yaml"
        shutil.copyfile(source, target)
        found.append(target)
    if generated:
        import yaml

        from tests.support.pods import realistic_pod

        for index in range(generated):
            pod = realistic_pod(f"web-{index}", "shop", privileged=index % 3 == 0)
            target = manifests / f"g{index:04d}.yaml"
            target.write_text(yaml.safe_dump(pod))
            found.append(target)
    return policies, found


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int, str]:
    cpu, start = _cpu(), time.perf_counter()
    done = subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(), check=False
    )
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed, _cpu() - cpu, done.returncode, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="runs per manifest and tool")
    parser.add_argument("--generated", type=int, default=0, help="generated Pods added to the manifests")
    parser.add_argument("--limit", type=int, default=0, help="at most N manifests (evenly picked)")
    parser.add_argument("--cold", action="store_true", help="celkeeper without its disk cache")
    parser.add_argument(
        "--baseline",
        metavar="DIR|PROGRAM",
        help="another checkout's celkeeper, run the same way, or another celkeeper program (a file)",
    )
    parser.add_argument(
        "--celkeeper",
        metavar="PROGRAM",
        help="the celkeeper program to time (e.g. a venv's bin/celkeeper installed from the wheel); "
        "default: this checkout's, python -m celkeeper",
    )
    args = parser.parse_args()
    try:
        gator = find_gator()
    except GatorUnavailable as exc:
        raise SystemExit(f"gator is needed (hack/gator/build.sh): {exc}") from None
    with tempfile.TemporaryDirectory(prefix="celkeeper-startup-") as tmp:
        base = Path(tmp)
        policies, manifests = prepare(base, args.generated)
        policy_files = len(list(policies.iterdir()))
        if args.limit and len(manifests) > args.limit:
            step = len(manifests) / args.limit
            manifests = [manifests[int(i * step)] for i in range(args.limit)]
        cache = base / "cache"
        tools: dict[str, tuple[list[str], dict[str, str]]] = {
            "celkeeper": (
                [args.celkeeper, "test"] if args.celkeeper else [sys.executable, "-m", "celkeeper", "test"],
                dict(_ENV, CELKEEPER_CACHE_DIR=str(cache)),
            ),
            "gator": ([str(gator), "test"], dict(_ENV)),
        }
        if args.baseline and Path(args.baseline).is_file():
            tools["baseline"] = (
                [args.baseline, "test"],
                dict(_ENV, CELKEEPER_CACHE_DIR=str(cache / "baseline")),
            )
        elif args.baseline:
            tools["baseline"] = (
                [sys.executable, "-m", "celkeeper", "test"],
                dict(
                    _ENV,
                    CELKEEPER_CACHE_DIR=str(cache / "baseline"),
                    PYTHONPATH=str(Path(args.baseline).resolve()),
                ),
            )
        names = list(tools)
        for name in names:  # untimed: caches filled, binaries and bytecode read once
            argv, env = tools[name]
            timed([*argv, "-f", str(policies), "-f", str(manifests[0])], env)
        walls: dict[str, list[float]] = {n: [] for n in names}
        cpus: dict[str, list[float]] = {n: [] for n in names}
        differ: list[str] = []
        reviews: list[
            str
        ] = []  # an AdmissionReview: celkeeper reviews its request (README), gator the object
        pair = 0
        for _ in range(args.rounds):
            for manifest in manifests:
                order = names[pair % len(names) :] + names[: pair % len(names)]
                pair += 1
                outputs = {}
                for name in order:
                    argv, env = tools[name]
                    if args.cold and name != "gator":
                        shutil.rmtree(Path(env["CELKEEPER_CACHE_DIR"]), ignore_errors=True)
                    wall, cpu, code, out = timed([*argv, "-f", str(policies), "-f", str(manifest)], env)
                    walls[name].append(wall)
                    cpus[name].append(cpu)
                    outputs[name] = (code, sorted(out.splitlines()))
                if outputs["celkeeper"] != outputs["gator"]:
                    (reviews if b"AdmissionReview" in manifest.read_bytes() else differ).append(manifest.name)
    runs = len(walls["gator"])
    print(
        f"`test -f policies/ -f <manifest>`: {len(manifests)} manifests x {args.rounds} rounds, "
        f"{policy_files} policy files; celkeeper's cache {'cold' if args.cold else 'warm'}; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    mean, median = statistics.fmean, statistics.median
    for name in names:
        print(
            f"  {name:<10} wall per manifest: mean {mean(walls[name]):.3f} s, median "
            f"{median(walls[name]):.3f} s; CPU mean {mean(cpus[name]):.3f} s ({runs} runs)"
        )
    for name in names:
        if name != "gator":
            print(
                f"  {name} / gator: wall x{mean(walls[name]) / mean(walls['gator']):.2f} "
                f"(medians x{median(walls[name]) / median(walls['gator']):.2f}), "
                f"CPU x{mean(cpus[name]) / mean(cpus['gator']):.2f}"
            )
    if "baseline" in walls:
        print(
            f"  celkeeper / baseline: wall x{mean(walls['celkeeper']) / mean(walls['baseline']):.2f} "
            f"(medians x{median(walls['celkeeper']) / median(walls['baseline']):.2f}), "
            f"CPU x{mean(cpus['celkeeper']) / mean(cpus['baseline']):.2f}"
        )
    print(
        f"  manifests where celkeeper's and gator's output differ: {len(differ)} {differ[:10]} (and "
        f"{len(reviews)} AdmissionReviews, reviewed as their request on purpose)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
