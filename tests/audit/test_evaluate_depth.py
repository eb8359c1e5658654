"""Known issue (docs/known-issues.md): cel-expr-python 0.1.3 crashes the process (SIGSEGV) converting a
value nested ~6,000 levels deep, which the API server accepts (up to 10,000). The audit does not give
the engine objects deeper than MAX_DEPTH (an error of their constraints instead). This test shows when
that guard can go: it fails once cel-expr-python converts such values without crashing."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from celkeeper.audit.evaluate import MAX_DEPTH

REPRO = textwrap.dedent("""
    import sys
    from cel_expr_python import cel
    value = node = {}
    for _ in range(int(sys.argv[1])):
        node["a"] = {}
        node = node["a"]
    env = cel.NewEnv(variables={"object": cel.Type.DYN})
    print(env.compile("has(object.a)").eval(env.Activation({"object": value})))
""")


def depth_survives(levels: int) -> bool:
    proc = subprocess.run(
        [sys.executable, "-c", REPRO, str(levels)], capture_output=True, timeout=120, check=False
    )
    assert proc.returncode in (0, -signal.SIGSEGV), proc.stderr.decode()[-2000:]
    return proc.returncode == 0


def test_cel_expr_python_still_crashes_on_values_nested_as_deep_as_the_api_server_allows() -> None:
    assert depth_survives(MAX_DEPTH)  # what the audit gives the engine at most
    assert not depth_survives(10_000), "fixed: the audit's depth guard (MAX_DEPTH) can go"
