"""The container image hack/image/build.sh made from the Dockerfile (an OCI archive; ./dev test builds it as
root): its configuration says what the manifests assume, and it runs: unpacked, entered as its user
65532 with its own root directory, the image's own Python and celkeeper serve the examples over TLS with
the cel-go engine (the image carries its library; without it celkeeper would fall back to cel-python)."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from celkeeper.tls import write_certificates
from tests.support.processes import ManagedProcess, free_port
from tests.support.requirements import NODE
from tests.support.serve import ROOT
from tests.support.waiting import wait_for

BUILD = ROOT / "hack" / "image" / "build.sh"


def _archive() -> Path:
    path = Path(
        subprocess.run([str(BUILD), "--print"], capture_output=True, text=True, check=True).stdout.strip()
    )
    # built and run as root, as the node's images are (CELKEEPER_REQUIRE_NODE makes a missing one a failure)
    if os.geteuid() != 0:
        NODE.unavailable("the image test", PermissionError("the image runs in namespaces only root makes"))
    if not path.is_file():
        NODE.unavailable(
            "the image test", FileNotFoundError(f"no image archive at {path}: run {BUILD} as root")
        )
    return path


class OciArchive:
    def __init__(self, path: Path) -> None:
        self.tar = tarfile.open(path)  # noqa: SIM115 - read by the module's tests, closed by the fixture
        index = self._json("index.json")
        self.ref = index["manifests"][0].get("annotations", {}).get("org.opencontainers.image.ref.name", "")
        self.manifest = self._blob(index["manifests"][0]["digest"])
        self.config = self._blob(self.manifest["config"]["digest"])

    def _json(self, name: str) -> Any:
        member = self.tar.extractfile(name)
        assert member is not None
        return json.load(member)

    def _blob(self, digest: str) -> Any:
        return self._json("blobs/" + digest.replace(":", "/"))

    def unpack(self, rootfs: Path) -> None:
        for layer in self.manifest["layers"]:
            member = self.tar.extractfile("blobs/" + layer["digest"].replace(":", "/"))
            assert member is not None
            data = member.read()
            if layer["mediaType"].endswith("gzip"):
                data = gzip.decompress(data)
            with tarfile.open(fileobj=io.BytesIO(data)) as layer_tar:
                for entry in layer_tar.getmembers():
                    name = Path(entry.name)
                    if name.name.startswith(".wh."):
                        (rootfs / name.parent / name.name[4:]).unlink(missing_ok=True)
                        continue
                    layer_tar.extract(entry, rootfs, set_attrs=True, filter="fully_trusted")


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OciArchive, Path]]:
    archive = OciArchive(_archive())
    with archive.tar:
        rootfs = tmp_path_factory.mktemp("image") / "rootfs"
        rootfs.mkdir()
        archive.unpack(rootfs)
        yield archive, rootfs


def test_the_image_is_what_the_manifests_run(image: tuple[OciArchive, Path]) -> None:
    archive, _ = image
    from tests.e2e.install.support import find, install_documents

    container = find(install_documents(), "Deployment", "celkeeper-webhook")["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert archive.ref == container["image"]
    config = archive.config["config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["/opt/celkeeper/bin/celkeeper"]
    size = sum(layer["size"] for layer in archive.manifest["layers"])
    print(
        f"\nimage {archive.ref}: {len(archive.manifest['layers'])} layers, {size / 2**20:.0f} MiB compressed"
    )


def test_the_image_serves_the_examples_as_its_user(image: tuple[OciArchive, Path], tmp_path: Path) -> None:
    _, rootfs = image
    work = rootfs / "work"
    (work / "policies").mkdir(parents=True)
    subprocess.run(["cp", "-r", str(ROOT / "examples"), str(work / "policies")], check=True)
    certs = write_certificates(work / "certs", ["localhost"], ["127.0.0.1"])
    certs.key.chmod(0o644)
    port = free_port()
    argv = [
        "unshare",
        f"--root={rootfs}",
        "--setgid=65532",
        "--setuid=65532",
        "--wd=/",
        "/opt/celkeeper/bin/celkeeper",
        "serve",
        "--policy-dir",
        "/work/policies/examples",
        "--cert",
        "/work/certs/tls.crt",
        "--key",
        "/work/certs/tls.key",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "1",
        "--state-dir",
        "/tmp/celkeeper-state",
    ]
    (rootfs / "tmp").chmod(0o1777)
    (rootfs / "dev" / "shm").mkdir(parents=True, exist_ok=True)  # a runtime mounts a tmpfs here, mode 1777
    (rootfs / "dev" / "shm").chmod(0o1777)
    process = ManagedProcess("image-serve", argv, tmp_path / "serve.log", env={"PATH": "/usr/bin:/bin"})
    process.start()
    try:

        def ready() -> bool:
            assert process.running(), process.log_tail()
            try:
                return requests.get(
                    f"https://localhost:{port}/readyz", verify=str(certs.ca_cert), timeout=2
                ).ok
            except requests.RequestException:
                return False

        wait_for(ready, timeout=120, interval=0.5, what="the image's celkeeper to be ready")
        readyz = requests.get(f"https://localhost:{port}/readyz", verify=str(certs.ca_cert), timeout=5).json()
        assert readyz["engine"] == "cel-go", process.log_tail()
        assert "cel-go engine is not available" not in process.log_tail(200)
        bad = (ROOT / "examples" / "reviews" / "pod-denied.json").read_bytes()
        answer = requests.post(
            f"https://localhost:{port}/v1/admit",
            data=bad,
            headers={"Content-Type": "application/json"},
            verify=str(certs.ca_cert),
            timeout=10,
        ).json()["response"]
        assert answer["allowed"] is False and answer["status"]["message"].startswith("[")
        uids = subprocess.run(
            ["ps", "-o", "uid=", "--ppid", str(process.pid), "-p", str(process.pid)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        assert uids and set(uids) == {"65532"}
    finally:
        process.stop()
