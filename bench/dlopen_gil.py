"""How long the main thread stops while another thread opens the native library: with ctypes.CDLL alone
(its dlopen keeps the GIL while the dynamic loader relocates the library) and as celkeeper.native.ffi
opens it (libc's dlopen called through ctypes, which releases the GIL, then ctypes.CDLL). Each run is a
fresh process (the library not yet loaded) whose main thread spins, noting its longest pause, while a
thread opens the library; the medians of --runs runs per way are printed. docs/known-issues.md says
what this shows (the workaround can go when ctypes.CDLL's pauses are as short as ffi's).

    .venv/bin/python bench/dlopen_gil.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import ctypes, sys, threading, time
from celkeeper.native.ffi import _dlopen_without_gil
from celkeeper.native.locate import find_library
path = str(find_library()[0])
done = threading.Event()
def open_library():
    if sys.argv[1] == "ffi":
        _dlopen_without_gil(path)
    ctypes.CDLL(path)
    done.set()
thread = threading.Thread(target=open_library)
last = time.perf_counter()
longest = 0.0
thread.start()
while not done.is_set():
    now = time.perf_counter()
    longest = max(longest, now - last)
    last = now
print(longest * 1000)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    pauses: dict[str, list[float]] = {"ctypes.CDLL": [], "ffi": []}
    for _ in range(args.runs):  # alternated, so that load from elsewhere hits both alike
        for way, found in pauses.items():
            done = subprocess.run(
                [sys.executable, "-c", CHILD, way], capture_output=True, text=True, check=True, env=env
            )
            found.append(float(done.stdout))
    print(f"main thread's longest pause while another thread opens the library, median of {args.runs}:")
    for way, found in pauses.items():
        runs = ", ".join(f"{p:.1f}" for p in found)
        print(f"  {way:12} {statistics.median(found):6.1f} ms  (runs: {runs})")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
