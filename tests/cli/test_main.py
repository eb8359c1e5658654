"""cli/main.py: the process-wide settings of a command run as the process's command."""

from __future__ import annotations

import subprocess
import sys

from tests.cli.conftest import EXAMPLES, ROOT

SUITE = str(EXAMPLES / "required-labels" / "suite.yaml")


def test_one_shot_commands_collect_cyclic_garbage_rarely_the_server_as_python_does() -> None:
    # run as the process's command (argv from sys.argv), verify raises the collector's threshold
    # (cli/main.py ONE_SHOT); serve is not one of them; main(argv) called by a program changes nothing
    script = (
        "import gc, sys\n"
        "from celkeeper.cli import main\n"
        "default = gc.get_threshold()\n"
        "main.main(['verify', sys.argv[1]])\n"
        "print('#', gc.get_threshold() == default)\n"
        "sys.argv = ['celkeeper', 'verify', sys.argv[1]]\n"
        "main.main()\n"
        "print('#', gc.get_threshold() == main.ONE_SHOT_GC_THRESHOLD)\n"
        "print('#', 'serve' in main.ONE_SHOT, sorted(main.ONE_SHOT))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, SUITE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    marked = [line for line in run.stdout.splitlines() if line.startswith("# ")]
    assert marked == ["# True", "# True", "# False ['expand', 'lint', 'mutate', 'testcmd', 'verify']"]
