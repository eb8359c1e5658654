"""Go's sysmon and the timer slack the library is loaded with (docs/known-issues.md: Go's sysmon).

Each process below loads the library once, then calls it as a webhook worker does: one call of
about a millisecond of Go, then a pause in Python. Counted: how often the runtime's own threads
wake up per call (their voluntary context switches). With Linux's default slack, sysmon polls every
20 us during each call; loaded with GO_TIMER_SLACK_NS, the polls stretch to milliseconds and only
the wake-up at the call's start is left. If the first assertion fails, a Go release no longer polls
during calls from C: the slack (celkeeper/native/ffi.py) can go.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from celkeeper.native.ffi import GO_TIMER_SLACK_NS
from tests.support.native import require_celgo

ROOT = Path(__file__).resolve().parents[3]
CALLS = 400

PROBE = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from celkeeper.cel.celgo.engine import CelGoEngine
    from celkeeper.native.ffi import Library
    from celkeeper.native.locate import find_library

    slack, calls = int(sys.argv[1]), int(sys.argv[2])
    before_load = int(Path("/proc/self/timerslack_ns").read_text())
    engine = CelGoEngine(Library(find_library()[0], slack))
    program = engine.compile("object.items.all(s, s.matches('^a+b?$'))")
    activation = engine.activation(object={"items": ["a" * 20] * 300}, old_object=None, request=None)
    assert engine.evaluate(program, activation) is True

    def wakeups():
        total = 0
        for task in Path("/proc/self/task").iterdir():
            if task.name != str(os.getpid()):  # the runtime's threads (this one calls the library)
                status = (task / "status").read_text()
                total += int(status.split("\\nvoluntary_ctxt_switches:")[1].split()[0])
        return total

    start = wakeups()
    for _ in range(calls):
        engine.evaluate(program, activation)
        time.sleep(0.001)  # the worker's Python part of a review: the runtime goes idle
    print(json.dumps({
        "per_call": (wakeups() - start) / calls,
        "slack_before": before_load,
        "slack_after": int(Path("/proc/self/timerslack_ns").read_text()),
    }))
    """
)


def _probe(slack_ns: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(slack_ns), str(CALLS)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timer slack is Linux's (prctl)")
def test_the_library_loaded_with_a_timer_slack_keeps_sysmon_from_polling_during_calls() -> None:
    require_celgo()
    default = _probe(0)  # 0: loaded without touching the slack
    slack = _probe(GO_TIMER_SLACK_NS)
    # Go's sysmon polls (20 us sleeps) while a call runs: several wake-ups per call of ~1 ms
    assert default["per_call"] >= 2.0, default
    # with the slack: the wake-up that starts each call, rarely more
    assert slack["per_call"] <= default["per_call"] / 2, (slack, default)
    # the loading thread keeps its own slack
    assert slack["slack_after"] == slack["slack_before"], slack
