"""`celkeeper`: Gatekeeper-compatible admission policies in CEL.

Each sub-command lives in its own module of celkeeper.cli and provides
`register(subparsers) -> None`, which adds its parser and sets `func` (args -> exit code).
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from celkeeper.cli.background import COMPILE_THREADS

if TYPE_CHECKING:  # imported by main() once the native library started loading (PRELOAD): see main()
    import argparse
    from typing import NoReturn

# sub-command modules, in the order `celkeeper --help` lists them
COMMANDS: tuple[str, ...] = (
    "serve",
    "audit",
    "certs",
    "crds",
    "verify",
    "testcmd",
    "explain",
    "mutate",
    "expand",
    "lint",
    "vap",
)
#: sub-command -> the module that registers it
_MODULES = {name: name for name in COMMANDS if name != "testcmd"} | {"test": "testcmd"}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of `only` (its module alone is imported: a command's
    start-up does not pay for the others' imports, e.g. `verify` for the webhook's)."""
    import argparse

    parser = argparse.ArgumentParser(prog="celkeeper", description=__doc__.splitlines()[0].replace("`", ""))
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (only,) if only else COMMANDS:
        importlib.import_module(f"celkeeper.cli.{name}").register(subparsers)
    return parser


def requested_command(argv: Sequence[str]) -> str | None:
    """The module of the sub-command argv names (its first argument that is not an option), if it
    is one of COMMANDS; None otherwise (no command, help, or a mistake: the full parser words it)."""
    return _MODULES.get(next((a for a in argv if not a.startswith("-")), ""))


#: sub-commands that read files, decide and exit. Run as the process's command (argv None: the
#: console script, `python -m celkeeper`), Python's cyclic garbage collector runs in them after 200,000
#: net allocations rather than 700 (as mypy sets it): a `verify` of the examples and library samples
#: collected 61 times for ~8% of its CPU and freed nothing that changed its peak memory (the data is
#: trees: reference counting frees it). The long-running processes keep Python's defaults.
ONE_SHOT = frozenset({"verify", "testcmd", "lint", "mutate", "expand"})
ONE_SHOT_GC_THRESHOLD = (200_000, 30, 30)


#: sub-commands whose run starts by loading the engine (on a thread: cli.background), with the compilers
#: each will compile templates on: run as the process's command with the default engine (cel-go), the
#: native library starts loading before anything else is imported (the argument parser, errors, settings,
#: the command's modules: ~90 ms sooner than after them), and the compilers warming right after it (the
#: Go runtime's start and the compilers' warm-up no longer delay the first templates' compilation)
PRELOAD = {"verify": COMPILE_THREADS, "testcmd": 1}


def preloads(argv: Sequence[str]) -> bool:
    """Whether a run of `argv` (the process's arguments) starts loading the native library at once: a
    PRELOAD command with the default engine, not `--cluster` (its engine loads only when the cluster
    has templates) nor help. Any option argparse could read as another engine (`--engine X`, or an
    abbreviation of it) decides against: argparse reads the arguments afterwards."""
    if requested_command(argv) not in PRELOAD:
        return False
    words = list(argv[: argv.index("--")] if "--" in argv else argv)
    for i, word in enumerate(words):
        if word in ("-h", "--help", "--cluster"):
            return False
        name, _, value = word.partition("=")
        if len(name) >= 3 and "--engine".startswith(name):
            from celkeeper.settings import DEFAULT_ENGINE

            if not value:
                value = words[i + 1] if i + 1 < len(words) else ""
            if value != DEFAULT_ENGINE:
                return False
    return True


def process_main() -> NoReturn:
    """The process's command (the console script, `python -m celkeeper`): `main()` on sys.argv, then the
    process exits with its code, a ONE_SHOT command's as `end_now` ends it."""
    code = main()
    if requested_command(sys.argv[1:]) in ONE_SHOT:
        end_now(code)
    raise SystemExit(code)


def end_now(code: int) -> None:
    """End the process with `code` as its exit would, without the interpreter's teardown: the atexit
    handlers run and the standard streams are flushed, then os._exit. The teardown frees every module
    and object one by one (~200 modules and what they hold), memory the exit returns at once: ~18 ms
    of the ~0.26 s of CPU of a `test -f` run of one manifest (12-06, installed from the wheel). Returns
    (the caller exits as usual) when a thread other than daemons is still running (an exit waits for
    it) or a stream cannot be flushed (an exit reports that, exit code 120)."""
    if any(t is not threading.main_thread() and not t.daemon for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            return
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    command = requested_command(sys.argv[1:] if argv is None else argv)
    if argv is None and command in ONE_SHOT:
        gc.set_threshold(*ONE_SHOT_GC_THRESHOLD)
        if command is not None and preloads(sys.argv[1:]):
            from celkeeper.cli.background import preload_library

            preload_library(PRELOAD[command])
    from celkeeper.errors import CelkeeperError

    parser = build_parser(command)
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(func(args))
    except CelkeeperError as err:
        if args.debug:
            raise
        print(f"celkeeper {args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
