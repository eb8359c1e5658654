"""Command-line options that more than one sub-command takes."""

from __future__ import annotations

import argparse

from celkeeper.settings import DEFAULT_ENGINE, ENGINES


def add_engine_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`--engine NAME`: which CEL engine compiles and evaluates the templates."""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default=DEFAULT_ENGINE,
        help="CEL engine (default: %(default)s)",
    )


def add_filename_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, help: str) -> None:
    """`-f/--filename PATH` (repeatable, into `filenames`): files and folders of documents."""
    parser.add_argument(
        "-f", "--filename", action="append", default=[], metavar="FILE|DIR", dest="filenames", help=help
    )
