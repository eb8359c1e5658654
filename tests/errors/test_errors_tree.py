"""The error tree drawn in docs/architecture.md ("## Errors") against the exception classes celkeeper
defines: every class is drawn, once, under its base class, and nothing else is drawn."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

import celkeeper

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(celkeeper.__file__).resolve().parent

#: an entry of the tree: the drawing (│ ├── └──, spaces), then the class name
_ENTRY = re.compile(r"^(?P<drawing>[│├└─ ]*)(?P<name>\w+)")


def drawn_tree() -> dict[str, str | None]:
    """Each class drawn in the tree -> the class drawn above it (None for the root)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```\n", 1)[1].split("```", 1)[0]
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []  # (depth, name) of the entries above
    for line in block.splitlines():
        m = _ENTRY.match(line)
        assert m, f"not an entry of the tree: {line!r}"
        depth = len(m["drawing"])
        assert depth % 4 == 0, f"misdrawn (indent {depth}): {line!r}"
        while stack and stack[-1][0] >= depth:
            stack.pop()
        assert m["name"] not in parents, f"{m['name']} is drawn twice"
        parents[m["name"]] = stack[-1][1] if stack else None
        stack.append((depth, m["name"]))
    return parents


def defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in celkeeper's modules, by name (imports every module)."""
    found: dict[str, type[BaseException]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__main__" or "go" in parts:  # __main__ runs the CLI; go/ is the Go module
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        module = importlib.import_module(name)
        for cls in vars(module).values():
            if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == name:
                assert cls.__name__ not in found, f"two exceptions named {cls.__name__}: the tree needs one"
                found[cls.__name__] = cls
    assert "celkeeper.errors" in sys.modules
    return found


def test_the_error_tree_draws_every_exception_under_its_base() -> None:
    drawn = drawn_tree()
    defined = defined_exceptions()
    assert "CelkeeperError" in defined and len(defined) > 20  # the discovery found the modules
    missing = sorted(set(defined) - set(drawn))
    assert not missing, f"exceptions not in the error tree of docs/architecture.md: {missing}"
    # the other entries are the bases they hang from (BaseException, Exception, ValueError, ...)
    classes = {base.__name__: base for cls in defined.values() for base in cls.__mro__[:-1]}
    unknown = sorted(set(drawn) - set(classes))
    assert not unknown, f"drawn in the error tree, not celkeeper's exceptions nor their bases: {unknown}"
    for name, parent in drawn.items():
        cls = classes[name]
        base = cls.__bases__[0].__name__ if cls is not BaseException else None
        assert parent == base, f"{name} is drawn under {parent}, but its base is {base}"
