"""Load generation and process accounting for bench/webhook.py: wrk (closed loop, or an open loop
paced by a Lua script) or a Python client, the server's CPU time and memory from /proc."""

from __future__ import annotations

import http.client
import os
import re
import resource
import ssl
import statistics
import subprocess
import threading
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def tree(root: int) -> set[int]:
    """A process and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo.extend(children.get(pid, []))
    return found


def cpu_seconds(pids: set[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLK_TCK


def rss_mib(pids: set[int]) -> float:
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        match = re.search(r"VmRSS:\s+(\d+) kB", status)
        total += int(match.group(1)) if match else 0
    return total / 1024


def run_queue_wait(pids: set[int]) -> tuple[float, float]:
    """Seconds the processes' threads spent runnable but waiting for a CPU (the scheduler's run_delay,
    /proc/<pid>/task/<tid>/schedstat): (their main threads, their other threads). A worker's main
    thread serves its requests, so its wait is latency added by CPU contention (the load generator,
    the sibling worker, the Go runtime's threads, other processes), not by the server's code."""
    main = other = 0
    for pid in pids:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                waited = int((task / "schedstat").read_text().split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if task.name == str(pid):
                main += waited
            else:
                other += waited
    return main / 1e9, other / 1e9


def machine_ticks() -> tuple[int, int]:
    """The machine's CPU time so far in clock ticks (/proc/stat's first line): all of it, and what the
    hypervisor stole (its virtual CPUs wanted to run and were not run)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return sum(fields), fields[7]  # user nice system idle iowait irq softirq steal


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def _seconds(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not match:
        raise ValueError(text)
    return float(match.group(1)) * _UNITS[match.group(2)]


LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("{body}", "rb"); wrk.body = f:read("*a"); f:close()
local interval = {interval}
if interval > 0 then
  local ffi = require("ffi")
  ffi.cdef[[ typedef struct {{ long tv_sec; long tv_nsec; }} ck_ts; int clock_gettime(int, ck_ts *); ]]
  local ts = ffi.new("ck_ts")
  local function now_ms()
    ffi.C.clock_gettime(1, ts)
    return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
  end
  local next_at = nil
  -- each request takes the next slot of this thread's fixed schedule (open loop, paced)
  function delay()
    local now = now_ms()
    if next_at == nil then next_at = now end
    local wait = next_at - now
    next_at = next_at + interval
    if wait < 0 then return 0 end
    return wait
  end
end
function done(summary, latency, requests)
  io.write(string.format("CK p50=%d p99=%d n=%d errors=%d status=%d\\n", latency:percentile(50),
    latency:percentile(99), summary.requests, summary.errors.connect + summary.errors.read +
    summary.errors.write + summary.errors.timeout, summary.errors.status))
end
"""


class Result:
    def __init__(
        self,
        rate: float,
        p50: float,
        p99: float,
        requests: int,
        errors: int,
        client_cpu: float,
        server_cpu: float,
    ) -> None:
        self.rate, self.p50, self.p99, self.requests, self.errors = rate, p50, p99, requests, errors
        self.client_cpu, self.server_cpu = client_cpu, server_cpu
        self.worker_cpu: list[float] = []  # per worker, busiest first (connections stay with a worker)
        # seconds the server's threads waited for a CPU (run_queue_wait): main threads, other threads
        self.server_wait = (0.0, 0.0)
        self.steal = 0.0  # the share of the machine's CPU time its hypervisor gave elsewhere (machine_ticks)

    @property
    def cpu_per_review(self) -> float:
        return self.server_cpu / self.requests if self.requests else 0.0

    def open_loop(self) -> str:
        """An open-loop run's latency, with what says how fast the machine was meanwhile: the server's
        CPU per review (the same code takes longer on a slower stretch of a shared machine) and the
        time stolen from its virtual CPUs."""
        return (
            f"p50 {self.p50 * 1e3:.2f} ms, p99 {self.p99 * 1e3:.2f} ms "
            f"(server CPU {self.cpu_per_review * 1e6:,.0f} us per review, steal {self.steal:.1%})"
        )


def worker_split(worker_cpu: list[float]) -> str:
    """How the work fell on the workers (a connection stays with the worker that accepted it)."""
    total = sum(worker_cpu)
    if len(worker_cpu) < 2 or total <= 0:
        return ""
    return "workers' share " + "/".join(f"{c / total:.0%}" for c in worker_cpu)


def _per_worker(pids: set[int], before: dict[int, float]) -> list[float]:
    return sorted((cpu_seconds({p}) - before[p] for p in pids), reverse=True)


def run_wrk(
    url: str,
    body: Path,
    work: Path,
    duration: int,
    connections: int,
    threads: int,
    rate: float | None,
    server_pids: set[int],
    client_cpus: str = "",
) -> Result:
    """`client_cpus`: run wrk on these CPUs only (taskset -c), e.g. to see what its share of the
    cores does to the server's run-queue wait and the tail."""
    interval = (threads * 1000.0 / rate) if rate else 0  # ms between two requests of one wrk thread
    script = work / ("paced.lua" if rate else "closed.lua")
    script.write_text(LUA.format(body=body, interval=f"{interval:.6f}"))
    cmd = [
        *(["taskset", "-c", client_cpus] if client_cpus else []),
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{duration}s",
        "--timeout",
        "5s",
        "-s",
        str(script),
        url,
    ]
    client0, server0 = children_cpu(), cpu_seconds(server_pids)
    each0 = {p: cpu_seconds({p}) for p in server_pids}
    wait0, ticks0 = run_queue_wait(server_pids), machine_ticks()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    client1, server1 = children_cpu(), cpu_seconds(server_pids)
    wait1, ticks1 = run_queue_wait(server_pids), machine_ticks()
    rate_found = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    ck = re.search(r"CK p50=(\d+) p99=(\d+) n=(\d+) errors=(\d+) status=(\d+)", out)
    assert ck, out
    p50, p99, n, errors, status = (int(x) for x in ck.groups())
    result = Result(
        rate_found, p50 / 1e6, p99 / 1e6, n, errors + status, client1 - client0, server1 - server0
    )
    result.worker_cpu = _per_worker(server_pids, each0)
    result.server_wait = (wait1[0] - wait0[0], wait1[1] - wait0[1])
    elapsed = ticks1[0] - ticks0[0]
    result.steal = (ticks1[1] - ticks0[1]) / elapsed if elapsed > 0 else 0.0
    return result


def run_python(
    host: str,
    port: int,
    body: bytes,
    ca: Path,
    duration: int,
    connections: int,
    rate: float | None,
    server_pids: set[int],
) -> Result:
    """The fallback load generator: one thread and one keep-alive connection per `connections`."""
    ctx = ssl.create_default_context(cafile=str(ca))
    latencies: list[list[float]] = [[] for _ in range(connections)]
    errors = [0] * connections
    stop_at = time.monotonic() + duration
    interval = connections / rate if rate else 0.0

    def worker(i: int) -> None:
        conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=5)
        next_at = time.monotonic() + interval * i / connections
        while True:
            if interval:
                now = time.monotonic()
                if next_at > now:
                    time.sleep(next_at - now)
                next_at += interval
            start = time.monotonic()
            if start >= stop_at:
                break
            try:
                conn.request("POST", "/v1/admit", body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                resp.read()
                if resp.status != 200:
                    errors[i] += 1
            except (OSError, http.client.HTTPException):
                errors[i] += 1
                conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=5)
                continue
            latencies[i].append(time.monotonic() - start)

    cpu0, server0, t0 = time.process_time(), cpu_seconds(server_pids), time.monotonic()
    each0 = {p: cpu_seconds({p}) for p in server_pids}
    wait0 = run_queue_wait(server_pids)
    pool = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.monotonic() - t0
    cpu1, server1 = time.process_time(), cpu_seconds(server_pids)
    wait1 = run_queue_wait(server_pids)
    flat = sorted(x for lat in latencies for x in lat)
    q = statistics.quantiles(flat, n=100) if len(flat) > 2 else [0.0] * 99
    result = Result(len(flat) / elapsed, q[49], q[98], len(flat), sum(errors), cpu1 - cpu0, server1 - server0)
    result.worker_cpu = _per_worker(server_pids, each0)
    result.server_wait = (wait1[0] - wait0[0], wait1[1] - wait0[1])
    return result
