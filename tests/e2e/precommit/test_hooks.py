"""The repository's pre-commit hooks (.pre-commit-hooks.yaml) as a user runs them: the real `pre-commit`
tool, in a git repository whose .pre-commit-config.yaml names this repository at its HEAD commit;
pre-commit installs celkeeper from it into an environment of its own (`pip install .`, the native
library from its cache) and runs the hooks on the staged files. A privileged Pod fails `celkeeper-test`
with the example policy's message; an unprivileged one passes; `celkeeper-lint` fails a broken
template; `celkeeper-verify` runs a Suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "privileged-containers"


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def head() -> str:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs this repository as a git checkout")
    committed = subprocess.run(
        ["git", "cat-file", "-e", "HEAD:.pre-commit-hooks.yaml"], cwd=ROOT, capture_output=True, check=False
    )
    if committed.returncode != 0:
        pytest.skip("HEAD has no .pre-commit-hooks.yaml yet (commit it to test it)")
    return _git(ROOT, "rev-parse", "HEAD")


def _pre_commit(repo: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    env.pop("VIRTUAL_ENV", None)
    # the tool installed with the test extra, run by the interpreter running the tests: CI calls
    # .venv/bin/python directly, so neither VIRTUAL_ENV nor PATH names the environment
    argv = [sys.executable, "-m", "pre_commit", *args]
    return subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=900, check=False)


def test_the_hooks_check_what_is_staged(head: str, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "policies").mkdir()
    for name in ("template.yaml", "constraint.yaml"):
        shutil.copy(EXAMPLE / name, repo / "policies" / name)
    shutil.copytree(EXAMPLE, repo / "suites" / "privileged")
    config = {
        "repos": [
            {
                "repo": str(ROOT),
                "rev": head,
                "hooks": [
                    {"id": "celkeeper-test", "args": ["-f", "policies/"], "files": "^manifests/"},
                    {"id": "celkeeper-lint", "files": "^policies/"},
                    {"id": "celkeeper-verify", "args": ["suites/"]},
                ],
            }
        ]
    }
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    (repo / "manifests").mkdir()
    shutil.copy(EXAMPLE / "objects" / "allowed.yaml", repo / "manifests" / "fine.yaml")
    _git(repo, "add", "-A")
    home = tmp_path / "pre-commit-home"

    clean = _pre_commit(repo, home, "run", "--all-files")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    for hook in ("celkeeper test", "celkeeper lint", "celkeeper verify"):
        assert f"{hook}..." in clean.stdout, clean.stdout
    assert "Failed" not in clean.stdout

    shutil.copy(EXAMPLE / "objects" / "disallowed.yaml", repo / "manifests" / "privileged.yaml")
    _git(repo, "add", "-A")
    denied = _pre_commit(repo, home, "run", "--all-files")
    assert denied.returncode == 1, denied.stdout + denied.stderr
    assert "privileged containers are not allowed: agent, sysctl" in denied.stdout, denied.stdout
    assert "celkeeper lint...........................................................Passed" in denied.stdout

    (repo / "manifests" / "privileged.yaml").unlink()
    template = (repo / "policies" / "template.yaml").read_text()
    (repo / "policies" / "template.yaml").write_text(template.replace("expression:", "expresion:", 1))
    _git(repo, "add", "-A")
    broken = _pre_commit(repo, home, "run", "--all-files")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "policies/template.yaml:30:17: document 1: spec.targets[0].code[0].source" in broken.stdout, (
        broken.stdout
    )
