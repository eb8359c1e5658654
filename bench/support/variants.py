"""A benchmark's variants of one tree by environment: `--env NAME:VAR=VALUE,...` (bench/audit.py,
bench/gatekeeper.py, bench/pod_memory.py, bench/tail.py)."""

from __future__ import annotations

import argparse


def add_env_option(parser: argparse.ArgumentParser) -> None:
    """`--env NAME:VAR=VALUE,...` (repeatable): also measure this tree with those environment variables;
    each is read by env_variant."""
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME:VAR=VALUE,...",
        help="also measure this tree with these environment variables (repeatable)",
    )


def env_variant(spec: str) -> tuple[str, dict[str, str]]:
    """`NAME:VAR=VALUE[,VAR=VALUE...]` -> (NAME, {VAR: VALUE}); a malformed spec ends the benchmark."""
    name, _, assignments = spec.partition(":")
    env: dict[str, str] = {}
    for assignment in filter(None, assignments.split(",")):
        key, sep, value = assignment.partition("=")
        if not sep or not key:
            raise SystemExit(f"bench: --env {spec!r}: {assignment!r} is not VAR=VALUE")
        env[key] = value
    if not name or not env:
        raise SystemExit(f"bench: --env {spec!r}: expected NAME:VAR=VALUE[,VAR=VALUE...]")
    return name, env
