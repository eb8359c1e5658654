"""cli/main.py: the process-wide settings of a command run as the process's command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from celkeeper.cli import main
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


@pytest.mark.parametrize(
    ("argv", "loads"),
    [
        (["test", "-f", "policies/", "-f", "one.yaml"], True),
        (["test", "--engine", "cel-go", "-f", "x"], True),
        (["test", "--engine=cel-go", "-f", "x"], True),
        (["verify", "suite.yaml"], True),
        (["test", "--engine", "cel-python", "-f", "x"], False),
        (["test", "--engine=cel-python", "-f", "x"], False),
        (["test", "--eng", "cel-python", "-f", "x"], False),  # argparse's abbreviation of --engine
        (["test", "--engine"], False),
        (["test", "--cluster", "-f", "x"], False),
        (["test", "-h"], False),
        (["test", "--", "--engine=cel-python"], True),  # a path, after --
        (["lint", "policies/"], False),
        (["serve"], False),
        ([], False),
    ],
)
def test_which_runs_start_loading_the_native_library_at_once(argv: list[str], loads: bool) -> None:
    assert main.preloads(argv) is loads


def test_a_run_that_loads_the_library_at_once_prints_what_a_program_calling_main_gets() -> None:
    # the console script's run of `test` (the library loading from the start, cli.background) and
    # main(argv) called by a program (loading it when the command asks) print the same
    script = (
        "import sys\n"
        "from celkeeper.cli import main\n"
        "if sys.argv[1] == 'program':\n"
        "    raise SystemExit(main.main(sys.argv[2:]))\n"
        "sys.argv = ['celkeeper', *sys.argv[2:]]\n"
        "main.process_main()\n"
    )
    argv = ["test", "-f", str(EXAMPLES / "required-labels")]
    runs = [
        subprocess.run(
            [sys.executable, "-c", script, how, *argv],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        for how in ("program", "process")
    ]
    assert runs[0].returncode == runs[1].returncode == 1, runs[0].stderr
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.count("Message:") >= 3
    assert runs[0].stderr == runs[1].stderr


_ENDING = (
    "import atexit, os, sys, threading, time\n"
    "from celkeeper.cli import main\n"
    "class Torn:\n"  # freed by the interpreter's teardown, which has closed sys.stdout by then
    "    def __del__(self, write=os.write):\n"
    "        write(1, b'#! torn down\\n')\n"
    "torn = Torn()\n"
    "atexit.register(print, '#! atexit ran')\n"  # buffered: flushed by the end
    "if sys.argv[1] == 'thread':\n"
    "    def late():\n"
    "        time.sleep(0.3)\n"
    "        print('#! thread ended')\n"
    "    threading.Thread(target=late).start()\n"
    "sys.argv = ['celkeeper', *sys.argv[2:]]\n"
    "main.process_main()\n"
)


def _ending(how: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _ENDING, how, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_one_shot_command_ends_without_teardown_after_its_output_and_atexit_handlers() -> None:
    run = _ending("plain", "test", "-f", str(EXAMPLES / "required-labels"))
    assert run.returncode == 1, run.stderr
    assert run.stdout.count("Message:") >= 3
    assert run.stdout.endswith("#! atexit ran\n")  # the handler ran, its output flushed; no teardown
    assert "summary:" in run.stderr


def test_a_one_shot_command_waits_for_a_running_thread_as_an_exit_does() -> None:
    run = _ending("thread", "test", "-f", str(EXAMPLES / "required-labels"))
    assert run.returncode == 1, run.stderr
    assert run.stdout.count("Message:") >= 3
    # the exit waited for the thread (the teardown's finalizers are not certain to run with one)
    assert [line for line in run.stdout.splitlines() if line.startswith("#! ")][:2] == [
        "#! thread ended",
        "#! atexit ran",
    ]


def test_other_commands_exit_as_python_does() -> None:
    run = _ending("plain", "crds")
    assert run.returncode == 0, run.stderr
    assert "CustomResourceDefinition" in run.stdout
    assert [line for line in run.stdout.splitlines() if line.startswith("#! ")] == [
        "#! atexit ran",
        "#! torn down",
    ]
