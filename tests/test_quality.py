"""The project's own rules, checked as tests: import-linter layers, ruff (lint, format) and mypy."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: install the dev extra (pip install -e '.[test,dev]')")
    return found


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_layers_and_engine_imports_follow_the_architecture() -> None:
    proc = _run(_tool("lint-imports"), "setup.cfg")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_is_clean() -> None:
    proc = _run(_tool("ruff"), "check", "celkeeper", "tests", "bench")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_applied() -> None:
    proc = _run(_tool("ruff"), "format", "--check", "celkeeper", "tests", "bench")
    assert proc.returncode == 0, "run `ruff format celkeeper tests bench`:\n" + proc.stdout + proc.stderr


def test_mypy_is_clean() -> None:
    proc = _run(_tool("mypy"), "--config-file", "setup.cfg")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _import_cycles() -> list[list[str]]:
    """The strongly connected components of more than one module in celkeeper's import graph (every
    import statement, function-level ones included: grimp, import-linter's graph)."""
    import grimp

    graph = grimp.build_graph("celkeeper", cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        # Tarjan's algorithm, iteratively: (module, its imports not yet visited)
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, pending = work[-1]
            child = next(pending, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_the_import_graph_has_no_cycle() -> None:
    """A cycle broken only by a function-level import is still a cycle: two modules that need each
    other are one module, or share a third that both import."""
    assert _import_cycles() == []


#: where the retired engine's names may appear: the cel-python engine, whose front end cel-cpp (through
#: cel-expr-python) is, its tests, the architecture and known issues, and setup.cfg (its dependency pin)
RETIRED_ENGINE_WORDS = re.compile(r"cel-expr-python|cel-cpp", re.IGNORECASE)
RETIRED_ENGINE_PLACES = (
    "celkeeper/cel/celpython/",
    "tests/cel/celpython/",
    "docs/architecture.md",
    "docs/known-issues.md",
    "setup.cfg",
    "tests/test_quality.py",
)


def test_the_retired_engine_is_named_only_where_it_is_the_front_end() -> None:
    files = _run("git", "ls-files", "-z").stdout.split("\0")
    found = []
    for name in files:
        if not name or name.startswith(RETIRED_ENGINE_PLACES) or not (ROOT / name).is_file():
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += [
            f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if RETIRED_ENGINE_WORDS.search(line)
        ]
    assert found == [], "cel-expr-python/cel-cpp named outside the cel-python engine:\n" + "\n".join(found)


def _layers_in_contract() -> list[set[str]]:
    """setup.cfg's `[importlinter:contract:layers]`: top layer first, each a set of sibling names."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    lines = [line.strip() for line in parser["importlinter:contract:layers"]["layers"].splitlines()]
    return [{name.strip().removeprefix("celkeeper.") for name in line.split("|")} for line in lines if line]


def _layers_in_doc(path: Path) -> list[set[str]]:
    """The layer block of a document: the first fenced block after its `## Layers` heading. A line that
    starts at column 0 is a layer (names split by `|`, up to two spaces before its description, an
    optional `celkeeper.` prefix); an indented line continues the description of the one above."""
    text = path.read_text()
    _, found, after = text.partition("\n## Layers\n")
    assert found, f"{path.name} has no `## Layers` section"
    block = after.split("```", 2)
    assert len(block) == 3, f"{path.name}: no fenced block after `## Layers`"
    layers = []
    for line in block[1].strip("\n").splitlines():
        if not line.strip() or line[0].isspace():
            continue
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        layers.append({name.strip().removeprefix("celkeeper.") for name in names.split("|")})
    return layers


def _top_level_modules() -> set[str]:
    package = ROOT / "celkeeper"
    found = {p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    found |= {p.stem for p in package.glob("*.py") if p.stem not in {"__init__", "__main__"}}
    return found


@pytest.mark.parametrize("doc", ["docs/architecture.md", "DEVELOPERS.md"])
def test_the_documented_layers_are_the_contract(doc: str) -> None:
    """The layer list a document draws is setup.cfg's layers contract: the same layers, in the same
    order, with the same siblings on each line."""
    documented = _layers_in_doc(ROOT / doc)
    contract = _layers_in_contract()
    assert documented == contract, (
        f"{doc}'s layer list and setup.cfg's [importlinter:contract:layers] disagree:\n"
        f"  {doc}:  {' / '.join(' | '.join(sorted(layer)) for layer in documented)}\n"
        f"  setup.cfg: {' / '.join(' | '.join(sorted(layer)) for layer in contract)}"
    )


def test_every_package_has_a_layer() -> None:
    """No top-level package or module of celkeeper escapes the layers contract (nor is named there
    without existing)."""
    layered = set().union(*_layers_in_contract())
    modules = _top_level_modules()
    assert modules - layered == set(), f"in no layer of setup.cfg: {sorted(modules - layered)}"
    assert layered - modules == set(), f"layers naming no module: {sorted(layered - modules)}"


# -- Where tests go (DEVELOPERS.md, "Where tests go") ------------------------------------------------------

PACKAGE = ROOT / "celkeeper"
TESTS = ROOT / "tests"
# The end-to-end suites: the product as a whole, not one module (tests/e2e/<topic>/). Keep this set small.
E2E = {
    "gator": "celkeeper against Gatekeeper's gator on every Suite and a generated corpus (the oracle)",
    "gatekeeper": "celkeeper's mutation against Gatekeeper's mutation webhook on two real API servers",
    "install": "deploy/celkeeper.yaml and the Helm chart on a real API server, the webhook pods sandboxed",
    "image": "the container image hack/image/build.sh makes, unpacked and run",
    "node": "the install and the chart on a real node (kubelet, containerd, pods)",
    "wheel": "celkeeper's wheel installed without Go or a compiler, run on the cel-go engine",
    "precommit": "the repository's pre-commit hooks, run by the real pre-commit tool",
}
SHARED = "support"  # fixtures and helpers shared by the tests (tests/support/)
# Test files whose name cannot name a module of their package, and why.
NAME_EXCEPTIONS = {
    "tests/cel/k8slib/test_linear.py": "one property (linear time on hostile input) of every parser of the"
    " library at once: format, ip, quantity, semver and urls share one table of inputs",
    "tests/native/test_go_module.py": "runs `go vet`, `gofmt -l` and `go test` in the native library's Go"
    " module (celkeeper/native/go/), which is not a Python module",
}


def _test_folders() -> list[Path]:
    """Every folder under tests/ that is a Python package or holds test files."""
    found = []
    for folder in sorted(p for p in TESTS.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        if (folder / "__init__.py").exists() or any(folder.glob("test_*.py")):
            found.append(folder)
    return found


def _mirrored(folder: Path) -> Path | None:
    """The celkeeper package or module tests/<folder> mirrors, if any."""
    parts = folder.relative_to(TESTS).parts
    package = PACKAGE.joinpath(*parts)
    if package.is_dir() and any(package.glob("*.py")):
        return package
    module = package.with_suffix(".py")
    return module if module.is_file() else None


def _module_names(target: Path) -> set[str]:
    """What a test file beside `target`'s tests may be named after: a module or sub-package of the package
    (or the package itself, for its public API in __init__.py); for a top-level module, the module."""
    if target.is_file():
        return {target.stem}
    names = {target.name}
    for entry in target.iterdir():
        if entry.suffix == ".py" and not entry.name.startswith("__"):
            names.add(entry.stem)
        elif entry.is_dir() and any(entry.glob("*.py")):
            names.add(entry.name)
    return names


def test_every_test_folder_mirrors_a_package_or_is_an_e2e_suite_or_the_support() -> None:
    wrong = []
    for folder in _test_folders():
        parts = folder.relative_to(TESTS).parts
        if not parts or parts[0] == SHARED:
            continue
        if parts[0] == "e2e":
            if len(parts) > 1 and parts[1] not in E2E:
                wrong.append(f"tests/e2e/{parts[1]}: not one of the listed end-to-end suites {sorted(E2E)}")
            continue
        if _mirrored(folder) is None:
            wrong.append(f"{folder.relative_to(ROOT)}: no celkeeper/{'/'.join(parts)} package or module")
    assert not wrong, "tests mirror celkeeper's packages (DEVELOPERS.md):\n" + "\n".join(wrong)


def test_every_test_file_is_named_after_a_module_of_its_package() -> None:
    wrong = []
    for path in sorted(TESTS.rglob("test_*.py")):
        shown = str(path.relative_to(ROOT))
        parts = path.parent.relative_to(TESTS).parts
        if not parts:
            if path.name != "test_quality.py":
                wrong.append(f"{shown}: tests/ itself holds only test_quality.py (the project's own rules)")
            continue
        if parts[0] in (SHARED, "e2e") or shown in NAME_EXCEPTIONS:
            continue
        target = _mirrored(path.parent)
        if target is None:
            continue  # the folder test reports it
        stem = path.stem.removeprefix("test_")
        names = _module_names(target)
        if not any(stem == name or stem.startswith(name + "_") for name in names):
            wrong.append(
                f"{shown}: test_<module>.py or test_<module>_<aspect>.py, module one of {sorted(names)}"
            )
    assert not wrong, "test files are named after the module they test (DEVELOPERS.md):\n" + "\n".join(wrong)


def test_the_name_exceptions_and_e2e_suites_exist_and_are_documented() -> None:
    assert all((ROOT / path).is_file() for path in NAME_EXCEPTIONS), (
        "a NAME_EXCEPTIONS entry is gone: remove it"
    )
    present = {p.name for p in (TESTS / "e2e").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert present == set(E2E)
    developers = (ROOT / "DEVELOPERS.md").read_text()
    assert all(f"tests/e2e/{topic}/" in developers for topic in E2E), (
        "list every tests/e2e suite in DEVELOPERS.md"
    )
