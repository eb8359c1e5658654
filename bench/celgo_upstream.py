"""The cel-go engine's Go path on the cel-go it pins (Gatekeeper v3.23.1's) and on a newer upstream cel-go.

cel-go v0.30 (what Gatekeeper v3.23.1 and k8s.io/apiserver v0.36 build with) tracks Kubernetes' runtime
cost with an observer that allocates on every operator call; upstream reworked it (cel-expr/cel-go#1430)
in releases published under a new module path, cel.dev/cel-go (v0.32 on), which k8s.io/apiserver does
not import yet (docs/known-issues.md). This builds the engine's Go benchmark twice, as pinned and against
cel.dev/cel-go --upstream (module path rewritten to github.com/google/cel-go in a temporary copy, and
k8s.io/apiserver's two conversions that the newer checker types break fixed in a temporary copy), and
prints, per build: BenchmarkValidate (one request's conversion, then the 20 constraints of
bench/decision.py) in ns/op and allocations, alternated --rounds times, and, when valgrind is present,
instructions per iteration (callgrind, GOMAXPROCS=1: the same figure on any load). It also runs the
engine's Go tests on the upstream build. Nothing of the project changes; needs Go and the module proxy.

This is the measurement behind issue 11's and 13's remaining bars: how much of the engine's time is
cel-go's own, and what moving to the newer cel-go would give once Kubernetes' apiserver and Gatekeeper
use it (its error texts differ too: see docs/known-issues.md).

    .venv/bin/python bench/celgo_upstream.py [--upstream v0.33.2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "celkeeper" / "native" / "go"
OLD_PATH = "github.com/google/cel-go"
NEW_PATH = "cel.dev/cel-go"
# k8s.io/apiserver v0.36 converts a checker.SizeEstimate to a checker.CostEstimate, which newer cel-go's
# types no longer allow (pkg/cel/library/cost.go, twice)
APISERVER_FIX = (
    "checker.CostEstimate(l.sizeEstimate(args[0]))",
    "func() checker.CostEstimate { s := l.sizeEstimate(args[0]); "
    "return checker.CostEstimate{Min: s.Min, Max: s.Max} }()",
)


def go(*args: str, cwd: Path) -> str:
    done = subprocess.run(["go", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"go {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def writable_copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return target


def upstream_module(version: str, work: Path) -> Path:
    """cel.dev/cel-go at version, as module github.com/google/cel-go."""
    info = json.loads(go("mod", "download", "-json", f"{NEW_PATH}@{version}", cwd=work))
    copy = writable_copy(Path(info["Dir"]), work / "cel-go")
    for path in [*copy.rglob("*.go"), copy / "go.mod"]:
        text = path.read_text()
        if NEW_PATH in text:
            path.write_text(text.replace(NEW_PATH, OLD_PATH))
    return copy


def fixed_apiserver(work: Path) -> Path:
    info = json.loads(go("list", "-m", "-json", "k8s.io/apiserver", cwd=MODULE))
    copy = writable_copy(Path(info["Dir"]), work / "apiserver")
    cost = copy / "pkg" / "cel" / "library" / "cost.go"
    cost.write_text(cost.read_text().replace(*APISERVER_FIX))
    return copy


def test_binary(module: Path, out: Path) -> Path:
    go("test", "-c", "-o", str(out), "./k8scel", cwd=module)
    return out


def bench(binary: Path) -> tuple[float, int]:
    out = subprocess.run(
        [str(binary), "-test.run", "XXX", "-test.bench", "Validate$", "-test.benchtime", "2s"],
        cwd=MODULE / "k8scel",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = re.search(r"BenchmarkValidate\S*\s+\d+\s+(\d+) ns/op\s+\d+ B/op\s+(\d+) allocs/op", out)
    if not found:
        raise SystemExit(f"no benchmark figure in:\n{out}")
    return float(found.group(1)), int(found.group(2))


def instructions(binary: Path, work: Path) -> float | None:
    """Instructions per BenchmarkValidate iteration: callgrind over 501 iterations less over 1."""
    if shutil.which("valgrind") is None:
        return None
    totals = []
    for n in (1, 501):
        for _ in range(3):  # valgrind does not always see a Go program through
            log = work / f"callgrind-{binary.name}-{n}.log"
            subprocess.run(
                [
                    "valgrind",
                    "--tool=callgrind",
                    f"--callgrind-out-file={work}/cg.out",
                    f"--log-file={log}",
                    str(binary),
                    "-test.run",
                    "XXX",
                    "-test.bench",
                    "Validate$",
                    "-test.benchtime",
                    f"{n}x",
                ],
                cwd=MODULE / "k8scel",
                capture_output=True,
                check=False,
                env=os.environ
                | {
                    "GOMAXPROCS": "1",
                    "GODEBUG": "asyncpreemptoff=1",
                },  # callgrind trips on preemption signals
            )
            found = re.search(r"Collected : (\d+)", log.read_text()) if log.exists() else None
            if found:
                totals.append(int(found.group(1)))
                break
        else:
            return None
    return (totals[1] - totals[0]) / 500


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", default="v0.33.2", help=f"the {NEW_PATH} version (default v0.33.2)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("go") is None:
        print("celgo_upstream: skipped: no Go toolchain")
        return
    pinned_version = go("list", "-m", "-f", "{{.Version}}", OLD_PATH, cwd=MODULE).strip()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        celgo, apiserver = upstream_module(args.upstream, work), fixed_apiserver(work)
        module = writable_copy(MODULE, work / "engine-upstream")
        go(
            "mod",
            "edit",
            f"-replace={OLD_PATH}={celgo}",
            f"-replace=k8s.io/apiserver={apiserver}",
            cwd=module,
        )
        binaries = {
            f"{OLD_PATH} {pinned_version} (pinned)": test_binary(MODULE, work / "pinned.test"),
            f"{NEW_PATH} {args.upstream}": test_binary(module, work / "upstream.test"),
        }
        tests = subprocess.run(
            ["go", "test", "./k8scel"], check=False, cwd=module, capture_output=True, text=True
        )
        figures: dict[str, list[tuple[float, int]]] = {name: [] for name in binaries}
        for _ in range(args.rounds):  # alternated: load from elsewhere hits both alike
            for name, binary in binaries.items():
                figures[name].append(bench(binary))
        counted = {name: instructions(binary, work) for name, binary in binaries.items()}
    print("BenchmarkValidate (celkeeper/native/go/k8scel): one request, bench/decision.py's 20 constraints")
    print(f"{'cel-go':<40} {f'ns/op, median of {args.rounds}':>24} {'allocs/op':>10} {'instructions/op':>16}")
    for name, runs in figures.items():
        count = counted[name]
        shown = f"{count / 1e6:.3f} M" if count else "n/a"
        print(f"{name:<40} {statistics.median(r[0] for r in runs):>24,.0f} {runs[-1][1]:>10} {shown:>16}")
    (pinned_name, pinned), (upstream_name, upstream) = figures.items()
    ratio = statistics.median(r[0] for r in upstream) / statistics.median(r[0] for r in pinned)
    line = f"upstream / pinned: time {ratio:.2f}"
    pinned_count, upstream_count = counted[pinned_name], counted[upstream_name]
    if pinned_count and upstream_count:
        line += f", instructions {upstream_count / pinned_count:.2f}"
    print(line)
    print(f"the engine's Go tests on the upstream build: {'pass' if tests.returncode == 0 else 'FAIL'}")
    if tests.returncode != 0:
        print(tests.stdout[-3000:])


if __name__ == "__main__":
    main()
