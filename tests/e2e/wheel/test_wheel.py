"""celkeeper's wheel, as a user without Go or a C compiler installs it: a manylinux platform wheel that
carries the cel-go engine's library, installed with its dependencies from PyPI (wheels only: nothing is
compiled), into a fresh venv whose PATH has neither Go nor a compiler; `celkeeper verify` and `celkeeper
test` then run on cel-go."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.wheel import ROOT


def test_the_wheel_is_manylinux_and_carries_the_library(wheel: Path) -> None:
    assert wheel.name.startswith("celkeeper-") and "-py3-none-manylinux_" in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        wheel_file = next(n for n in names if n.endswith(".dist-info/WHEEL"))
        metadata = archive.read(wheel_file).decode()
    assert "celkeeper/native/_libcelkeeper.so" in names
    assert "celkeeper/native/_libcelkeeper-gatekeeper.so" in names  # the webhook workers' variant
    assert "Root-Is-Purelib: false" in metadata
    assert not [
        n for n in names if n.endswith((".go", "go.mod"))
    ]  # an installation finds the packaged library
    shown = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True, check=True
    )
    tag = wheel.name.rsplit("-", 1)[1].removesuffix(".whl")
    assert f'consistent with\nthe following platform tag: "{tag}"' in shown.stdout.replace(" \n", "\n"), (
        shown.stdout
    )


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A fresh venv with the wheel installed, and the environment to run it in (PATH: the venv's bin)."""
    base = tmp_path_factory.mktemp("wheel")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {
        "PATH": str(venv / "bin"),
        "HOME": str(base),
        "CELKEEPER_CACHE_DIR": str(base / "cache"),
        # the dependencies' wheels, downloaded once (the same files PyPI serves)
        "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
    }
    for tool in ("go", "gcc", "cc", "clang"):
        assert shutil.which(tool, path=env["PATH"]) is None, tool
    # --no-compile: no bytecode written ahead for the dependencies' thousands of modules (half the install's
    # time); the commands below compile what they import, as Python does
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--only-binary", ":all:", "--no-compile", str(wheel)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    yield venv, env


def _run(venv: Path, env: dict[str, str], *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / argv[0]), *argv[1:]],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_installed_without_go_or_a_compiler_it_runs_on_cel_go(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    venv, env = installed
    examples = shutil.copytree(ROOT / "examples", tmp_path / "examples")
    code = "import celkeeper.cel as c, celkeeper.native.locate as l, json; "
    code += "print(json.dumps([c.engine_available('cel-go')[0], str(l.find_library()[0]), "
    code += "str(l.find_library(l.GATEKEEPER)[0])]))"
    probe = _run(venv, env, "python", "-c", code, cwd=tmp_path)
    native = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    native = native / "celkeeper" / "native"
    expected = [True, str(native / "_libcelkeeper.so"), str(native / "_libcelkeeper-gatekeeper.so")]
    assert json.loads(probe.stdout) == expected, probe.stderr
    verify = _run(venv, env, "celkeeper", "verify", "--engine", "cel-go", str(examples), cwd=tmp_path)
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]
    assert verify.stdout.rstrip().endswith(" passed, 0 failed") and "PASS" in verify.stdout
    default = _run(venv, env, "celkeeper", "verify", str(examples), cwd=tmp_path)
    assert default.returncode == 0 and "cel-python" not in default.stderr, (
        default.stderr
    )  # the default: cel-go
    tested = _run(venv, env, "celkeeper", "test", "-f", str(examples / "privileged-containers"), cwd=tmp_path)
    assert tested.returncode == 1 and "privileged containers are not allowed" in tested.stdout, tested.stderr
    # the fast-http extra is not installed: the webhook reads request heads with Gunicorn's Python parser
    h1c = _run(
        venv, env, "python", "-c", "import celkeeper.webhook.http1 as h; print(h.FAST_PARSER)", cwd=tmp_path
    )
    assert h1c.stdout.strip() == "None", h1c.stdout + h1c.stderr
