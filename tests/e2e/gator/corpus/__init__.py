"""The generated differential corpus: templates x constraints x objects/reviews, written as Suites.

    from tests.e2e.gator.corpus import FAMILIES, write
    suites = write(tmp_path)          # one Suite per family, JSON documents beside it

Every family is a function returning a model.Family; `count()` is the number of cases.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.e2e.gator.corpus import expressions, requests, shapes
from tests.e2e.gator.corpus.model import Family, write_corpus

FAMILIES: tuple[Callable[[], Family], ...] = (
    expressions.params_family,
    expressions.fields_family,
    expressions.optional_family,
    expressions.runtime_errors_family,
    expressions.comprehensions_family,
    shapes.messages_family,
    shapes.compile_errors_family,
    shapes.keys_family,
    shapes.libraries_family,
    requests.operations_family,
    requests.template_operations_family,
    requests.matching_family,
    requests.invalid_constraints_family,
)


def families() -> list[Family]:
    return [make() for make in FAMILIES]


def count() -> int:
    return sum(f.case_count for f in families())


def write(root: Path) -> list[Path]:
    return write_corpus(root, families())
