"""The corpus cases where the pure-Python cel-python engine decides otherwise than Gatekeeper (gator),
grouped by reason; docs/known-issues.md lists the same reasons. The cel-go engine (the default) has
no such list: it agrees with gator on every case.

Checked strictly by tests/gator/test_corpus.py: a listed case must still differ from gator (else it
leaves the list), every other case must agree, and each reason is a strict expected failure.
Patterns are fnmatch patterns over case ids (`<family>/suite.yaml::<test>::<case>`).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class Known:
    name: str
    reason: str
    patterns: tuple[str, ...]


KNOWN: tuple[Known, ...] = ()


def known(case_id: str) -> Known | None:
    """The reason `case_id` is listed under, or None."""
    for entry in KNOWN:
        if any(fnmatch.fnmatchcase(case_id, p) for p in entry.patterns):
            return entry
    return None
