"""A process's memory from /proc/<pid>/smaps_rollup and /proc/<pid>/smaps, for bench/pod_memory.py and the
probe it plants in the server's processes (sitecustomize.py beside this file, which imports it by this
folder leading PYTHONPATH): standard library only."""

from __future__ import annotations

import re
from pathlib import Path

_HEAD = re.compile(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$")


def rollup(pid: int | str = "self") -> dict[str, float]:
    """smaps_rollup's figures in MiB (Rss, Pss, Anonymous, ...)."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, value = line.partition(":")
        if value.strip().endswith("kB"):
            out[key] = int(value.split()[0]) / 1024
    return out


def mappings(pid: int | str = "self") -> list[tuple[str, int, int]]:
    """Each mapping's (name, PSS kB, anonymous kB: a file mapping's pages made private, e.g. by
    relocations)."""
    rows: list[tuple[str, int, int]] = []
    name, pss, anon = "", 0, 0
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = _HEAD.match(line)
        if head:
            rows.append((name, pss, anon))
            name, pss, anon = head.group(1).strip(), 0, 0
        elif line.startswith("Anonymous:"):
            anon = int(line.split()[1])
        elif line.startswith("Pss:"):
            pss = int(line.split()[1])
    rows.append((name, pss, anon))
    return rows
