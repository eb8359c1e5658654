"""What holds each server process's memory, sampled from inside (bench/pod_memory.py --probe).

Imported by Python at start-up as `sitecustomize` when this folder leads PYTHONPATH, in every process
of the server (the master, and through a fork hook its workers; the informer). With CK_MEMPROBE_DIR set,
a daemon thread of each process appends one JSON line every CK_MEMPROBE_INTERVAL seconds (default 30) to
DIR/<pid>.jsonl:

  - `smaps`: /proc/self/smaps_rollup (Rss, Pss, Anonymous...) and the PSS split by mapping: the native
    library's file and relocated pages, glibc's main arena (`[heap]`), other anonymous memory, files;
  - `malloc`: glibc's mallinfo2 over every arena (arena: bytes of the brk heap and thread arenas,
    hblkhd: large blocks mmapped alone, uordblks in use, fordblks free), `sys.getallocatedblocks()`;
  - `pymalloc`: sys._debugmallocstats' arenas (allocated, reclaimed, highwater, now) and bytes in blocks;
  - `go`: the native library's `info()` when this process has loaded it (runtime/metrics);
  - `py`: gc's counts, the number of objects it tracks, every CK_MEMPROBE_TYPES samples the 25 most common
    types; with tracemalloc tracing (PYTHONTRACEMALLOC=1), the 15 largest growths since the sample
    CK_MEMPROBE_BASE (default 2), by line;
  - `threads`, `fds`.

Diagnostic only (tracemalloc and gc.get_objects cost CPU): never measured against the server alone.
"""

from __future__ import annotations

import os

if os.environ.get("CK_MEMPROBE_DIR"):
    import contextlib
    import ctypes
    import gc
    import json
    import re
    import sys
    import tempfile
    import threading
    import time
    from collections import Counter
    from pathlib import Path

    import ck_smaps

    _DIR = Path(os.environ["CK_MEMPROBE_DIR"])
    _INTERVAL = float(os.environ.get("CK_MEMPROBE_INTERVAL", "30"))
    _TYPES_EVERY = int(os.environ.get("CK_MEMPROBE_TYPES", "4"))
    _BASE = int(os.environ.get("CK_MEMPROBE_BASE", "2"))

    class _Mallinfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    def _smaps() -> dict[str, float]:
        out = ck_smaps.rollup()
        parts = dict.fromkeys(("so file", "so anon", "heap", "anon", "files", "stack"), 0.0)
        for name, pss, anon in ck_smaps.mappings():
            if name.endswith(("libcelkeeper.so", "libcelkeeper-gatekeeper.so")):
                parts["so file"] += (pss - anon) / 1024
                parts["so anon"] += anon / 1024
            elif name == "[heap]":
                parts["heap"] += pss / 1024
            elif name.startswith("[stack"):
                parts["stack"] += pss / 1024
            elif name.startswith("/"):
                parts["files"] += (pss - anon) / 1024
                parts["anon"] += anon / 1024
            else:
                parts["anon"] += pss / 1024
        out.update({f"pss {k}": v for k, v in parts.items()})
        return out

    _mallinfo2 = ctypes.CDLL(
        None
    ).mallinfo2  # once: each CDLL and function made stays until a full collection
    _mallinfo2.restype = _Mallinfo2

    def _malloc() -> dict[str, int]:
        info = _mallinfo2()
        out = {k: getattr(info, k) for k in ("arena", "hblkhd", "uordblks", "fordblks", "keepcost")}
        out["pyblocks"] = sys.getallocatedblocks()
        return out

    def _pymalloc() -> dict[str, int]:
        """sys._debugmallocstats' summary (it writes to the C stderr: read through a temporary file)."""
        with tempfile.TemporaryFile() as tmp:
            sys.stderr.flush()
            saved = os.dup(2)
            try:
                os.dup2(tmp.fileno(), 2)
                sys._debugmallocstats()
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode(errors="replace")
        out = {}
        for key, pattern in (
            ("arenas allocated total", r"# arenas allocated total\s+=\s+([\d,]+)"),
            ("arenas reclaimed", r"# arenas reclaimed\s+=\s+([\d,]+)"),
            ("arenas highwater", r"# arenas highwater mark\s+=\s+([\d,]+)"),
            ("arenas now", r"# arenas allocated current\s+=\s+([\d,]+)"),
            ("bytes in arenas", r"\d+ arenas \* \d+ bytes/arena\s+=\s+([\d,]+)"),
            ("bytes in blocks", r"# bytes in allocated blocks\s+=\s+([\d,]+)"),
            ("bytes free in pools", r"# bytes in available blocks\s+=\s+([\d,]+)"),
        ):
            match = re.search(pattern, text)
            if match:
                out[key] = int(match.group(1).replace(",", ""))
        return out

    def _go() -> dict[str, object] | None:
        ffi = sys.modules.get("celkeeper.native.ffi")
        library = getattr(ffi, "_loaded", None)
        if library is None or not library.ours:
            return None
        info: dict[str, object] = library.info()
        return {k: v for k, v in info.items() if isinstance(v, int)}

    class _Probe:
        def __init__(self) -> None:
            self.n = 0
            self.base: object = None

        def sample(self) -> dict[str, object]:
            record: dict[str, object] = {"t": time.time(), "pid": os.getpid(), "argv": sys.argv[:3]}
            for key, fn in (("smaps", _smaps), ("malloc", _malloc), ("pymalloc", _pymalloc), ("go", _go)):
                try:
                    record[key] = fn()
                except Exception as err:  # a probe reports, never stops the server
                    record[key] = f"error: {err}"
            py: dict[str, object] = {"gc": gc.get_count(), "tracked": len(gc.get_objects())}
            if self.n % _TYPES_EVERY == 0:
                py["types"] = Counter(type(o).__name__ for o in gc.get_objects()).most_common(25)
            import tracemalloc

            if tracemalloc.is_tracing():
                snap = tracemalloc.take_snapshot().filter_traces(
                    (tracemalloc.Filter(False, tracemalloc.__file__),)
                )
                py["traced"] = tracemalloc.get_traced_memory()
                if self.n == _BASE:
                    self.base = snap
                elif self.base is not None:
                    stats = snap.compare_to(self.base, "lineno")  # type: ignore[arg-type]
                    py["growth"] = [str(s) for s in stats[:15]]
            record["py"] = py
            status = Path("/proc/self/status").read_text()
            match = re.search(r"Threads:\s+(\d+)", status)
            record["threads"] = int(match.group(1)) if match else 0
            record["fds"] = len(os.listdir("/proc/self/fd"))
            self.n += 1
            return record

        def run(self) -> None:
            path = _DIR / f"{os.getpid()}.jsonl"
            while True:
                time.sleep(_INTERVAL)
                with contextlib.suppress(Exception), path.open("a") as out:
                    out.write(json.dumps(self.sample()) + "\n")

    def _start() -> None:
        threading.Thread(target=_Probe().run, name="memprobe", daemon=True).start()

    _start()
    os.register_at_fork(after_in_child=_start)
