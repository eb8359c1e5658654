"""The native library's Go module built with celkeeper's copies of some of its dependencies' files.

A dependency's file that celkeeper changes (docs/known-issues.md says which and why) is kept whole in
`_patches/<folder>/<path>` beside this file (Go ignores folders whose names start with `_`: they are not
packages of the module). Builds and tests of the module use a copy of that dependency, from the Go
module cache, with the file in place: `patched_modfile()` makes it once per content in the native
cache, with a go.mod replacing the module by the copy, given to the Go tool as `-modfile` (`go_flags()`).
(Go's -overlay cannot replace files of the module cache.)

Build-time tooling (it runs the Go tool): loaded by path by setup.py, the tests' and the benchmarks'
helpers; not part of the celkeeper package's code. By hand:

    GOFLAGS=$(python celkeeper/native/go/patched.py) go test ./...
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

GO_DIR = Path(__file__).resolve().parent
#: the dependencies' files celkeeper compiles its own copy of: module -> its folder under _patches
PATCHES = {
    "github.com/google/cel-go": "cel-go",
    "github.com/open-policy-agent/gatekeeper/v3": "gatekeeper",
    "k8s.io/apiserver": "apiserver",
}
PATCHES_DIR = GO_DIR / "_patches"


def _cache_root() -> Path:
    """The native library's cache (celkeeper/native/locate.py's cache_root)."""
    configured = os.environ.get("CELKEEPER_NATIVE_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "celkeeper-native"


def module_dir(module: str, go: str = "go", go_dir: Path = GO_DIR) -> Path:
    """Where the Go module cache holds the version of `module` go.mod requires (downloaded if missing)."""
    gomod = (go_dir / "go.mod").read_text()
    name = re.escape(module)
    # the version go.mod replaces the module by (itself at another version), else the one it requires
    version = re.search(rf"^\s*(?:replace\s+)?{name}\s+=>\s+{name}\s+(\S+)", gomod, re.M) or re.search(
        rf"^\s*(?:require\s+)?{name}\s+(v\S+)", gomod, re.M
    )
    if version is None:
        raise RuntimeError(f"{go_dir / 'go.mod'} does not require {module}")
    done = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version.group(1)}"],
        cwd=go_dir,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"go mod download {module}: {done.stderr.strip() or done.stdout.strip()}")
    return Path(json.loads(done.stdout)["Dir"])


def patched_modfile(go: str = "go", go_dir: Path = GO_DIR) -> Path:
    """The go.mod to build the module with its patched dependencies (`-modfile`): the module's own
    go.mod, each module of PATCHES replaced by a copy of it from the module cache with celkeeper's files
    in place. Made once per content (go.mod, go.sum, the patches) in the cache; a go.sum beside it."""
    digest = hashlib.sha256()
    patches: list[tuple[str, Path, list[Path]]] = []
    for module, folder in sorted(PATCHES.items()):
        files = sorted((go_dir / "_patches" / folder).rglob("*.go"))
        patches.append((module, go_dir / "_patches" / folder, files))
        for path in files:
            digest.update(str(path.relative_to(go_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    for name in ("go.mod", "go.sum"):
        digest.update((go_dir / name).read_bytes() + b"\0")
    root = _cache_root() / "patched" / digest.hexdigest()[:16]
    modfile = root / "go.mod"
    if modfile.is_file():
        return modfile
    partial = root.with_name(f".{root.name}.{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    replaces = []
    for module, source, files in patches:
        copy = partial / source.name
        shutil.copytree(module_dir(module, go, go_dir), copy)
        for path in [copy, *copy.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)  # the module cache's files are read-only
        for path in files:
            shutil.copyfile(path, copy / path.relative_to(source))
        replaces.append(f"replace {module} => {root / source.name}\n")
    gomod = (go_dir / "go.mod").read_text()
    for module in PATCHES:  # go.mod's own replacement of a patched module gives way to the copy's
        gomod = re.sub(rf"^\s*(?:replace\s+)?{re.escape(module)}(\s+v\S+)?\s+=>.*\n", "", gomod, flags=re.M)
    (partial / "go.mod").write_text(gomod + "\n" + "".join(replaces))
    shutil.copyfile(go_dir / "go.sum", partial / "go.sum")
    try:
        os.replace(partial, root)
    except OSError:  # made meanwhile by another build
        shutil.rmtree(partial, ignore_errors=True)
    return modfile


def go_flags(go: str = "go", go_dir: Path = GO_DIR) -> str:
    """GOFLAGS for any `go` command in the module (build, test, vet): read-only modules, and the go.mod
    with the patched dependencies (`patched_modfile`)."""
    return f"-mod=readonly -modfile={patched_modfile(go, go_dir)}"


if __name__ == "__main__":
    print(go_flags(sys.argv[1] if len(sys.argv) > 1 else "go"))
