"""Reading the files and folders named on the command line into documents.

Folders are walked recursively in sorted order; names starting with a dot are skipped (.git, editor
swap files). `-` reads standard input. Unreadable files and folders become one-line errors, never
tracebacks, and are never skipped without a word.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from celkeeper.documents import Document, ParsedText, parse_documents
from celkeeper.errors import CelkeeperError, DocumentError, Location
from celkeeper.localfiles import walk

POLICY_SUFFIXES = (".yaml", ".yml", ".json")
SUITE_SUFFIXES = (".yaml", ".yml")  # gator verify reads only these
STDIN = "-"


class PathError(CelkeeperError):
    """A path named on the command line that does not exist or has an unsupported extension."""


def expand(
    paths: Iterable[str], suffixes: tuple[str, ...] = POLICY_SUFFIXES, errors: list[str] | None = None
) -> list[str]:
    """The files named by `paths`: files as given (any extension), folders walked recursively.

    A trailing `/...` (gator's spelling of "recursively") is accepted and means the folder.
    Raises PathError for a path that does not exist, and for a folder (or one under it) that cannot
    be listed, unless `errors` is given: the folders' problems are then added to it.
    """
    found: list[str] = []
    seen: set[str] = set()
    problems: list[str] = []
    for path in paths:
        for file in _expand_one(path, suffixes, problems):
            key = os.path.realpath(file) if file != STDIN else STDIN
            if key not in seen:
                seen.add(key)
                found.append(file)
    if errors is not None:
        errors.extend(problems)
    elif problems:
        raise PathError(problems[0])
    return found


def _expand_one(path: str, suffixes: tuple[str, ...], errors: list[str]) -> list[str]:
    if path == STDIN:
        return [STDIN]
    if path.endswith("/...") or path == "...":
        path = path[: -len("...")] or "."
    if os.path.isdir(path):
        return walk(path, suffixes, errors)
    if os.path.exists(path):
        return [path]
    raise PathError(f"{path}: no such file or directory")


KUSTOMIZATION_NAMES = frozenset({"kustomization.yaml", "kustomization.yml", "Kustomization"})


def is_kustomization_file(path: str) -> bool:
    """A kustomize file (kustomize's own file names): not a policy document, whatever it holds."""
    return os.path.basename(path) in KUSTOMIZATION_NAMES


def read_text(path: str) -> str:
    """The text of a file (UTF-8) or of standard input; raises DocumentError with the reason."""
    if path == STDIN:
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except UnicodeDecodeError as err:
        raise DocumentError("cannot read: not UTF-8 text", Location(file=path)) from err
    except OSError as err:
        raise DocumentError(f"cannot read: {err.strerror or err}", Location(file=path)) from err


def read(path: str) -> ParsedText:
    """The documents of one file; an unreadable file is reported as an error of the result."""
    name = "<stdin>" if path == STDIN else path
    try:
        text = read_text(path)
    except DocumentError as err:
        return ParsedText((), (err,))
    return parse_documents(text, name)


def read_all(paths: Iterable[str], suffixes: tuple[str, ...] = POLICY_SUFFIXES) -> ParsedText:
    """The documents of every file under `paths`, and every problem reading them."""
    documents: list[Document] = []
    problems: list[str] = []
    found = expand(paths, suffixes, problems)
    errors: list[DocumentError] = [DocumentError(p) for p in problems]  # folders that cannot be listed
    for file in found:
        parsed = read(file)
        documents.extend(parsed.documents)
        errors.extend(parsed.errors)
    return ParsedText(tuple(documents), tuple(errors))
