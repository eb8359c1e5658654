#!/usr/bin/env python3
"""How late this machine wakes a thread: the floor under any p99 the webhook benchmarks print.

A thread sleeps 1 ms --samples times and records how late it woke (the scheduler's and the hypervisor's
delay, before any server is involved): on idle cores, then while --hogs processes keep the cores busy for
--duty of every 10 ms (as batch work beside a webhook pod would), then the same with the sleeping thread
asking for a CPU time slice of --slice-us (Linux's EEVDF scheduler, 6.12 or later: sched_setattr's
sched_runtime for SCHED_OTHER; its default is 0.7 ms x (1 + log2(cores))). Prints p50, p99, p99.9 and the
maximum of each, in ms. docs/performance.md ("Where a review's tail latency comes from") has what it
showed and why the webhook does not ask for a shorter slice.

    python3 bench/wakeup.py [--samples 20000] [--hogs 2] [--duty 0.5] [--slice-us 300]
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing
import os
import platform
import struct
import threading
import time
from collections.abc import Callable
from multiprocessing.synchronize import Event

#: sched_setattr, sched_getattr
_SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}
#: struct sched_attr (SCHED_ATTR_SIZE_VER1): size, policy, flags, nice, priority, runtime, deadline,
#: period, util_min, util_max
_ATTR = struct.Struct("IIQiIQQQII")


def late_ms(samples: int) -> tuple[float, float, float, float]:
    late = []
    for _ in range(samples):
        start = time.perf_counter_ns()
        time.sleep(0.001)
        late.append((time.perf_counter_ns() - start - 1_000_000) / 1e6)
    late.sort()

    def at(q: float) -> float:
        return late[min(len(late) - 1, int(q * len(late)))]

    return at(0.5), at(0.99), at(0.999), late[-1]


def hog(stop: Event, duty: float) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        while time.perf_counter() - start < 0.01 * duty:
            pass
        time.sleep(0.01 * (1 - duty))


def _slice_calls() -> tuple[Callable[..., int], int, int]:
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        raise SystemExit(f"bench: no sched_setattr number for {platform.machine()}")
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long
    return syscall, *numbers


def set_slice(ns: int) -> int:
    """Ask for a slice of `ns` for this thread; the slice the kernel then reports (0: none of its own)."""
    syscall, set_nr, get_nr = _slice_calls()
    attr = _ATTR.pack(_ATTR.size, 0, 0, os.getpriority(os.PRIO_PROCESS, 0), 0, ns, 0, 0, 0, 0)
    if syscall(set_nr, 0, ctypes.create_string_buffer(attr, _ATTR.size), 0) != 0:
        raise SystemExit(f"bench: sched_setattr: {os.strerror(ctypes.get_errno())}")
    buffer = ctypes.create_string_buffer(_ATTR.size)
    syscall(get_nr, 0, buffer, _ATTR.size, 0)
    return int(_ATTR.unpack(buffer.raw)[5])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=20000, help="sleeps per measurement (default 20000)")
    parser.add_argument("--hogs", type=int, default=2, help="busy processes (default 2)")
    parser.add_argument(
        "--duty", type=float, default=0.5, help="their busy share of every 10 ms (default 0.5)"
    )
    parser.add_argument("--slice-us", type=int, default=300, help="the slice asked for (default 300)")
    args = parser.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, Linux {platform.release()}; load average {load}")

    def show(what: str, figures: tuple[float, float, float, float]) -> None:
        p50, p99, p999, most = figures
        print(f"{what:<44} p50 {p50:6.3f}  p99 {p99:6.3f}  p99.9 {p999:6.3f}  max {most:6.3f} ms late")

    show("idle", late_ms(args.samples))
    stop = multiprocessing.Event()
    hogs = [multiprocessing.Process(target=hog, args=(stop, args.duty)) for _ in range(args.hogs)]
    for process in hogs:
        process.start()
    try:
        show(f"{args.hogs} processes busy {args.duty:.0%} of the time", late_ms(args.samples))
        result: list[tuple[int, tuple[float, float, float, float]]] = []

        def with_slice() -> None:  # on a thread of its own: the slice is the thread's
            given = set_slice(args.slice_us * 1000)
            result.append((given, late_ms(args.samples)))

        thread = threading.Thread(target=with_slice)
        thread.start()
        thread.join()
        given, figures = result[0]
        show(f"the same, a slice of {given / 1000:.0f} us (asked {args.slice_us})", figures)
    finally:
        stop.set()
        for process in hogs:
            process.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
