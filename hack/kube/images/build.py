#!/usr/bin/env python3
"""Build the node tests' own container images, without a registry or an image builder: OCI archives
(`<name>.oci.tar`, an OCI image layout in a tar, what `ctr images import` takes) written byte for byte
here, from static binaries built on this machine.

    hack/kube/images/build.py --out DIR     build what is missing or stale into DIR, print the archives

- `pause`: Kubernetes' own pause.c (k8s.io/kubernetes/build/pause/linux, from the Go module cache at the
  version hack/kube/node requires) compiled `-static` with the C compiler, as build/pause/Makefile does;
  the image is its Dockerfile's: `/pause`, user 65535, entrypoint `/pause`. The node's sandbox image.
- `nodetest`: hack/kube/images/nodetest, a static Go program (`serve` answers HTTP with its hostname,
  `get URL` fetches) in an otherwise empty image, user 65532. The pods of the node's own tests.

Each archive has a `<name>.oci.tar.stamp`: a hash of everything it is made from (this script, the sources,
the compiler and Go versions); an archive whose stamp differs is rebuilt. The layers are deterministic
(sorted entries, zero mtimes, gzip without a timestamp), so the same inputs give the same image digest.
The image's reference (`celkeeper.test/<name>:<tag>`) is in the archive's index.json, annotations
`io.containerd.image.name` and `org.opencontainers.image.ref.name`.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
NODE_MODULE = HERE.parent / "node"
NODETEST = HERE / "nodetest"
PAUSE_TAG = "3.10.2"  # build/pause/Makefile's TAG at Kubernetes 1.37
REGISTRY = "celkeeper.test"


def log(msg: str) -> None:
    print(f"images: {msg}", file=sys.stderr, flush=True)


def run(cmd: Sequence[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"images: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr.strip()}")
    return proc.stdout


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class File:
    path: str  # inside the image, no leading slash
    data: bytes
    mode: int = 0o755


def layer(files: Sequence[File]) -> tuple[bytes, str]:
    """(gzip-compressed tar, sha256 of the uncompressed tar = the layer's diff_id)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for f in sorted(files, key=lambda f: f.path):
            info = tarfile.TarInfo(f.path)
            info.size, info.mode, info.mtime = len(f.data), f.mode, 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(f.data))
    plain = raw.getvalue()
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(plain)
    return packed.getvalue(), "sha256:" + sha256(plain)


def write_archive(path: Path, ref: str, files: Sequence[File], config: dict[str, object]) -> str:
    """Write a one-layer OCI image archive for `ref`; return the manifest digest."""
    blobs: dict[str, bytes] = {}

    def blob(data: bytes, media_type: str) -> dict[str, object]:
        digest = sha256(data)
        blobs[digest] = data
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    packed, diff_id = layer(files)
    layer_desc = blob(packed, "application/vnd.oci.image.layer.v1.tar+gzip")
    image_config = {
        "created": "1970-01-01T00:00:00Z",
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "hack/kube/images/build.py"}],
    }
    config_desc = blob(canonical(image_config), "application/vnd.oci.image.config.v1+json")
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc,
        "layers": [layer_desc],
    }
    manifest_desc = blob(canonical(manifest), "application/vnd.oci.image.manifest.v1+json")
    manifest_desc["annotations"] = {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref}
    manifest_desc["platform"] = {"architecture": "amd64", "os": "linux"}
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [manifest_desc],
    }
    entries = [
        ("oci-layout", canonical({"imageLayoutVersion": "1.0.0"})),
        ("index.json", canonical(index)),
        *((f"blobs/sha256/{digest}", data) for digest, data in sorted(blobs.items())),
    ]
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(path)
    return str(manifest_desc["digest"])


def canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def kubernetes_source() -> Path:
    """k8s.io/kubernetes' source in the module cache, at the version hack/kube/node requires."""
    out = run(["go", "list", "-mod=readonly", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes"], cwd=NODE_MODULE)
    src = Path(out.strip())
    if not (src / "build" / "pause" / "linux" / "pause.c").is_file():
        run(["go", "mod", "download", "k8s.io/kubernetes"], cwd=NODE_MODULE)
    return src


def compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        sys.exit("images: no C compiler (gcc) to build pause.c: apt-get install gcc libc6-dev")
    return cc


class Image:
    name = ""

    def ref(self) -> str:
        raise NotImplementedError

    def inputs(self) -> bytes:
        raise NotImplementedError

    def build(self, tmp: Path) -> tuple[list[File], dict[str, object]]:
        raise NotImplementedError


class Pause(Image):
    name = "pause"

    def __init__(self) -> None:
        self.source = kubernetes_source() / "build" / "pause" / "linux" / "pause.c"
        self.cc = compiler()

    def ref(self) -> str:
        return f"{REGISTRY}/pause:{PAUSE_TAG}"

    def inputs(self) -> bytes:
        version = run([self.cc, "--version"]).splitlines()[0]
        return self.source.read_bytes() + version.encode()

    def build(self, tmp: Path) -> tuple[list[File], dict[str, object]]:
        binary = tmp / "pause"
        run(
            [
                self.cc,
                "-Os",
                "-Wall",
                "-Werror",
                "-static",
                f"-DVERSION=v{PAUSE_TAG}-celkeeper",
                "-o",
                str(binary),
                str(self.source),
            ]
        )
        run(["strip", str(binary)]) if shutil.which("strip") else None
        config = {"User": "65535:65535", "Entrypoint": ["/pause"]}
        return [File("pause", binary.read_bytes())], config


class NodeTest(Image):
    name = "nodetest"

    def ref(self) -> str:
        return f"{REGISTRY}/nodetest:1"

    def inputs(self) -> bytes:
        sources = sorted(p for p in NODETEST.iterdir() if p.is_file())
        return b"".join(p.name.encode() + p.read_bytes() for p in sources) + run(["go", "version"]).encode()

    def build(self, tmp: Path) -> tuple[list[File], dict[str, object]]:
        binary = tmp / "nodetest"
        env = dict(os.environ, CGO_ENABLED="0")
        run(
            ["go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", str(binary), "."],
            cwd=NODETEST,
            env=env,
        )
        config = {
            "User": "65532:65532",
            "Entrypoint": ["/nodetest"],
            "Cmd": ["serve"],
            "ExposedPorts": {"8080/tcp": {}},
        }
        return [File("nodetest", binary.read_bytes())], config


def ensure(image: Image, out: Path, force: bool) -> Path:
    archive = out / f"{image.name}.oci.tar"
    stamp_path = archive.with_name(archive.name + ".stamp")
    script = Path(__file__).read_bytes()
    want = sha256(script + image.ref().encode() + image.inputs())[:16]
    if not force and archive.is_file() and stamp_path.is_file() and stamp_path.read_text().strip() == want:
        log(f"{image.name} is up to date: {archive}")
        return archive
    with tempfile.TemporaryDirectory(prefix=f"celkeeper-image-{image.name}-") as tmp:
        files, config = image.build(Path(tmp))
        digest = write_archive(archive, image.ref(), files, config)
    stamp_path.write_text(want + "\n")
    log(f"built {image.ref()} ({digest[:19]}) into {archive}")
    return archive


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for the archives")
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for image in (Pause(), NodeTest()):
        print(ensure(image, args.out, args.force))
    return 0


if __name__ == "__main__":
    sys.exit(main())
