"""`celkeeper`: Gatekeeper-compatible admission policies in CEL.

Each sub-command lives in its own module of celkeeper.cli and provides
`register(subparsers) -> None`, which adds its parser and sets `func` (args -> exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from celkeeper.errors import CelkeeperError

# sub-command modules, in the order `celkeeper --help` lists them
COMMANDS: tuple[str, ...] = ("serve", "audit", "certs", "crds", "verify", "testcmd", "explain", "lint", "vap")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="celkeeper", description=__doc__.splitlines()[0].replace("`", ""))
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"celkeeper.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
