"""The offline tools' synced data (gator/backend.py): a Suite's inventory for verify, every object given
to test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from celkeeper.cel import ENGINES
from tests.support.native import require_celgo
from tests.support.syncdata import (
    ROOT,
)


@pytest.mark.parametrize("engine_name", ENGINES)
def test_verify_feeds_suites_inventory_to_data(engine_name: str) -> None:
    if engine_name == "cel-go":
        require_celgo()
    proc = subprocess.run(
        [sys.executable, "-m", "celkeeper", "verify", "--engine", engine_name, "-v", "referential/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--- PASS: host-taken" in proc.stdout
    assert proc.stdout.rstrip().endswith("10 passed, 0 failed")


def test_test_makes_every_object_synced_data(tmp_path: Path) -> None:
    folder = ROOT / "referential" / "unique-ingress-host"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "celkeeper",
            "test",
            "-f",
            str(folder / "template.yaml"),
            "-f",
            str(folder / "constraint.yaml"),
            "-f",
            str(folder / "objects"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # every object is in the inventory: the two Ingresses sharing example-host.example.com deny each
    # other, the two sharing example-host3 too; none conflicts with itself
    lines = sorted(proc.stdout.splitlines())
    assert proc.returncode == 1, proc.stderr
    assert lines == sorted(
        [
            'networking.k8s.io/v1/Ingress default/ingress-host1: ["unique-ingress-host"] Message: '
            '"ingress host conflicts with an existing ingress <example-host.example.com>"',
            'networking.k8s.io/v1/Ingress default/ingress-host2: ["unique-ingress-host"] Message: '
            '"ingress host conflicts with an existing ingress <example-host.example.com>"',
            'networking.k8s.io/v1/Ingress default/ingress-host3: ["unique-ingress-host"] Message: '
            '"ingress host conflicts with an existing ingress <example-host3.example.com>"',
            'networking.k8s.io/v1/Ingress other-ns/ingress-host4: ["unique-ingress-host"] Message: '
            '"ingress host conflicts with an existing ingress <example-host3.example.com>, '
            '<example-host.example.com>"',
        ]
    ), proc.stdout
