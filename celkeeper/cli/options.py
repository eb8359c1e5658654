"""Command-line options that more than one sub-command takes."""

from __future__ import annotations

import argparse
import sys

from celkeeper.settings import DEFAULT_ENGINE, ENGINES, FALLBACK_ENGINE, EngineName, parse_engine


def add_engine_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`--engine NAME`: which CEL engine compiles and evaluates the templates."""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help=f"CEL engine (default: {DEFAULT_ENGINE}; {FALLBACK_ENGINE} when the {DEFAULT_ENGINE} "
        "library is not built, with a warning)",
    )


def add_cache_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`--no-cache`: without the disk cache of earlier runs' results (gator.verdicts)."""
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="check parameter schemas and constraint parameters afresh, without the disk cache of"
        " earlier runs' results ($CELKEEPER_CACHE_DIR, default ~/.cache/celkeeper; empty: off)",
    )


def add_filename_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, help: str) -> None:
    """`-f/--filename PATH` (repeatable, into `filenames`): files and folders of documents."""
    parser.add_argument(
        "-f", "--filename", action="append", default=[], metavar="FILE|DIR", dest="filenames", help=help
    )


def engine_name(args: argparse.Namespace) -> EngineName:
    """The engine the options ask for; without --engine, the default when this installation has it,
    else the fallback (with a warning on stderr). Loads nothing."""
    if args.engine:
        return parse_engine(args.engine)  # one of argparse's choices
    from celkeeper.cel import engine_available  # the CEL layer's imports: once a command needs an engine

    ok, why = engine_available(DEFAULT_ENGINE)
    if ok:
        return DEFAULT_ENGINE
    sys.stderr.write(
        f"celkeeper: warning: the {DEFAULT_ENGINE} engine is not available ({why}); using {FALLBACK_ENGINE}\n"
    )
    return FALLBACK_ENGINE
