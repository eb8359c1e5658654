#!/usr/bin/env python3
"""What a round of the informer that compiles costs, and what the informer holds after it, with the native
library loaded in the informer (`in-process`, as before 12-06's change) and in a child process per round
(`child`: informer/libraryprocess.py, as `celkeeper serve` runs it, the child loading the library without
the admission policies; `child-full`: the child loading it with them, as with --enforce-admission-policies),
alternated in one run.

Each variant is a fresh process running the informer (celkeeper.informer.Informer, folder source) on
bench/webhook.py's 12 templates and 20 Pod constraints: a first round, then `--rounds` rounds that each
follow a change of one constraint file (an annotation: the listing differs, the policies are compiled
and checked again, a new generation is published). Per round it prints the wall time and the CPU time (user +
system) of the informer and of its children (the library's child, once it has ended), the median over
the rounds after the first; then the informer's memory after the last round (PSS and RSS,
/proc/self/smaps_rollup), with the Go runtime's figures where the library is loaded in the process.
A folder round also waits for two scans of the folder to agree (~0.1 s of wall time, in both variants).

    .venv/bin/python bench/informer_round.py [--rounds 10] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.webhook import write_policies  # noqa: E402

VARIANTS = ("in-process", "child", "child-full")

ROUNDS = r"""
import json, os, resource, sys, time
from pathlib import Path
from celkeeper.informer import FolderSource, Informer
from celkeeper.informer.process import install_library_process
from celkeeper.native import ffi
from celkeeper.settings import Settings
from celkeeper.snapshot import StateDir

variant, folder, state_dir, rounds = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
if variant.startswith("child"):
    install_library_process(admission_policies=variant == "child-full")
else:
    os.environ.setdefault("GOGC", "50")  # what the informer asked for before (it did not reach Go)
state = StateDir(state_dir)
state.reset()
informer = Informer(FolderSource(folder, deletion_grace=0.0), state, Settings())


def cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


constraint = sorted(folder.rglob("constraint-*.json"))[0]
document = json.loads(constraint.read_text())
figures = []
for i in range(rounds + 1):
    if i:
        document["metadata"]["annotations"] = {"bench.celkeeper.io/round": str(i)}
        constraint.write_text(json.dumps(document))
    (own0, kids0), wall0 = cpu(), time.perf_counter()
    informer.step()
    (own1, kids1), wall1 = cpu(), time.perf_counter()
    figures.append({"wall": wall1 - wall0, "cpu": own1 - own0, "children": kids1 - kids0})
    assert informer.last is not None and not informer.last.problems, informer.last.problems
memory = {}
for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
    key, value = line.split(":", 1)
    memory[key] = int(value.split()[0]) / 1024
library = ffi._loaded
go = library.info() if library is not None and type(library) is ffi.Library else {}
print(json.dumps({"rounds": figures, "pss": memory["Pss"], "rss": memory["Rss"], "anon": memory["Anonymous"],
                  "go": {k: go[k] / 2**20 for k in ("runtimeMemory", "released", "heapObjects") if k in go},
                  "gogc": go.get("gcPercent")}))
"""


def run(variant: str, folder: Path, state: Path, rounds: int) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "GOGC"}
    done = subprocess.run(
        [sys.executable, "-c", ROUNDS, variant, str(folder), str(state), str(rounds)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{done.stderr}")
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10, help="rounds after the first (default 10)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each variant, alternated (default 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="informer-round-") as tmp:
        print(f"load (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(
            "variant     first round: wall / CPU / children  later rounds (median): wall / CPU / children"
            "   informer after: PSS, RSS, anon MiB; Go runtime MiB (mapped, released, objects)"
        )
        for repeat in range(args.repeat):
            for variant in VARIANTS:
                folder = Path(tmp) / f"{variant}-{repeat}" / "policies"
                write_policies(folder)
                result = run(variant, folder, folder.parent / "state", args.rounds)
                rounds = result["rounds"]
                assert isinstance(rounds, list)
                first, later = rounds[0], rounds[1:]

                def median(key: str, later: list[dict[str, float]] = later) -> float:
                    return statistics.median(r[key] for r in later) * 1000

                go = result["go"]
                assert isinstance(go, dict)
                go_text = ", ".join(
                    f"{go[k]:.1f}" for k in ("runtimeMemory", "released", "heapObjects") if k in go
                )
                print(
                    f"{variant:<11} {first['wall'] * 1000:>12.0f} / {first['cpu'] * 1000:.0f} / "
                    f"{first['children'] * 1000:.0f} ms {median('wall'):>20.0f} / {median('cpu'):.0f} / "
                    f"{median('children'):.0f} ms        "
                    f"{result['pss']:.1f}, {result['rss']:.1f}, {result['anon']:.1f}"
                    + (f"; {go_text} (GOGC {result['gogc']})" if go_text else "")
                )
        print(f"load (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
