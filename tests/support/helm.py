"""`helm`, built from Go modules by hack/helm/build.sh into ~/.cache/celkeeper-helm (pytest fixture `helm`).

Skips with the reason when it is not built (no Go); with CELKEEPER_REQUIRE_KUBE=1 (CI) that is a failure.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.binaries import BinariesUnavailable
from tests.support.requirements import KUBE

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "hack" / "helm" / "build.sh"
CHART = ROOT / "charts" / "celkeeper"


class Helm:
    def __init__(self, binary: Path) -> None:
        self.binary = binary
        self._renderings: dict[tuple[str, ...], str] = {}

    def run(
        self, *args: str, check: bool = True, kubeconfig: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": "/tmp/celkeeper-helm-cache",
            "HELM_CONFIG_HOME": "/tmp/celkeeper-helm-config",
            "HELM_DATA_HOME": "/tmp/celkeeper-helm-data",
        }
        if kubeconfig is not None:  # commands that talk to a cluster (install, upgrade, uninstall)
            env["KUBECONFIG"] = str(kubeconfig)
        proc = subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, timeout=120, env=env, check=False
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
        return proc

    def template(self, *sets: str, namespace: str = "celkeeper-system") -> str:
        """`helm template` of the chart with `sets`; rendered once per session (the chart does not change
        while the tests run)."""
        args = ["template", "celkeeper", str(CHART), "--namespace", namespace, "--include-crds"]
        for value in sets:
            args += ["--set", value]
        key = tuple(args)
        if key not in self._renderings:
            self._renderings[key] = self.run(*args).stdout
        return self._renderings[key]


@pytest.fixture(scope="session")
def helm() -> Helm:
    path = Path(
        subprocess.run([str(BUILD), "--print"], capture_output=True, text=True, check=True).stdout.strip()
    )
    if not os.access(path, os.X_OK):
        reason = f"helm is not built ({path}): run {BUILD} (./dev test does, when Go is installed)"
        KUBE.unavailable("the chart's tests", BinariesUnavailable(reason))
    return Helm(path)
