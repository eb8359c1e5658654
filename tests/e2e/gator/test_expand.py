"""`celkeeper expand` against `gator expand` (Gatekeeper v3.23.1) on generated inputs: ExpansionTemplates
(Deployment -> Pod, CronJob -> Job -> Pod), the mutation differential's generated mutators of every kind
(tests/e2e/gatekeeper/cases.py: path forms, pathTests, match by namespace, labels, namespaceSelector,
source; conflicts), Namespaces, and objects in known, `default`, unknown and no namespaces. Each round's
files go to both tools; the output must be byte for byte the same (YAML, and JSON for some rounds), and
where gator refuses the round, celkeeper must fail too."""

from __future__ import annotations

import contextlib
import copy
import io
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from celkeeper.cli.main import main as celkeeper_main
from tests.e2e.gatekeeper import cases
from tests.support.native import require_celgo

ROOT = Path(__file__).resolve().parents[3]
SEED = 20261206
ROUNDS = 48

TEMPLATES = [
    {
        "apiVersion": "expansion.gatekeeper.sh/v1alpha1",
        "kind": "ExpansionTemplate",
        "metadata": {"name": "expand-deployments"},
        "spec": {
            "applyTo": [{"groups": ["apps"], "kinds": ["Deployment"], "versions": ["v1"]}],
            "templateSource": "spec.template",
            "generatedGVK": {"kind": "Pod", "group": "", "version": "v1"},
        },
    },
    {
        "apiVersion": "expansion.gatekeeper.sh/v1alpha1",
        "kind": "ExpansionTemplate",
        "metadata": {"name": "expand-cronjobs"},
        "spec": {
            "applyTo": [{"groups": ["batch"], "kinds": ["CronJob"], "versions": ["v1"]}],
            "templateSource": "spec.jobTemplate",
            "generatedGVK": {"kind": "Job", "group": "batch", "version": "v1"},
            "enforcementAction": "warn",
        },
    },
    {
        "apiVersion": "expansion.gatekeeper.sh/v1alpha1",
        "kind": "ExpansionTemplate",
        "metadata": {"name": "expand-jobs"},
        "spec": {
            "applyTo": [{"groups": ["batch"], "kinds": ["Job"], "versions": ["v1"]}],
            "templateSource": "spec.template",
            "generatedGVK": {"kind": "Pod", "group": "", "version": "v1"},
        },
    },
]


def _cronjob(name: str, namespace: str, rng: random.Random) -> dict[str, Any]:
    pod = cases.pod(f"{name}-pod", namespace, rng)
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": namespace, "labels": cases.labels(rng)},
        "spec": {
            "schedule": "0 3 * * *",
            "jobTemplate": {
                "metadata": {"labels": {"app": rng.choice(["web", "db"])}},
                "spec": {
                    "template": {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]}
                },
            },
        },
    }


def _round_files(folder: Path, round_: cases.Round, number: int, rng: random.Random) -> None:
    objects = list(round_.creates)
    for i in range(4):
        unknown = ["unknown-ns"] if number % 5 == 4 else []  # gator refuses some of these rounds
        namespace = rng.choice([*cases.NAMESPACES, "default", *unknown])
        if rng.random() < 0.5:
            objects.append(_cronjob(f"{round_.name}-cron{i}", namespace, rng))
        else:
            objects.append(cases.deployment(f"{round_.name}-dep{i}", namespace, rng))
    if rng.random() < 0.3:  # a Deployment without a namespace: its Pod has none either
        loose = cases.deployment(f"{round_.name}-loose", "default", rng)
        del loose["metadata"]["namespace"]
        objects.append(loose)
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels)}}
        for name, labels in cases.NAMESPACES.items()
    ]
    folder.mkdir(parents=True)
    (folder / "templates.yaml").write_text(yaml.safe_dump_all(copy.deepcopy(TEMPLATES)))
    (folder / "mutators.yaml").write_text(yaml.safe_dump_all(round_.mutators))
    (folder / "namespaces.yaml").write_text(yaml.safe_dump_all(namespaces))
    (folder / "objects.yaml").write_text(yaml.safe_dump_all(objects))


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)


def _celkeeper(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`celkeeper ARGV` in this process (as compare.py runs `celkeeper verify`: 48 interpreters started
    and celkeeper imported each time were most of this test's time)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = celkeeper_main(argv)
    return subprocess.CompletedProcess(["celkeeper", *argv], code, out.getvalue(), err.getvalue())


@pytest.mark.gator
def test_celkeeper_expands_every_round_as_gator(gator: Path, tmp_path: Path) -> None:
    require_celgo()
    rng = random.Random(SEED)
    rounds = cases.rounds(SEED, count=ROUNDS, creates=10, updates=0, annotated=0)
    compared = failed = resultants = mutated = 0
    different: list[str] = []
    for number, round_ in enumerate(rounds):
        folder = tmp_path / round_.name
        _round_files(folder, round_, number, rng)
        fmt = "json" if number % 4 == 3 else "yaml"
        theirs = _run([str(gator), "expand", "--filename", str(folder), "--format", fmt])
        ours = _celkeeper(["expand", "--filename", str(folder), "--format", fmt])
        if theirs.returncode != 0:
            failed += 1
            if ours.returncode == 0:
                different.append(f"{round_.name}: gator refused ({theirs.stderr.strip()}), celkeeper did not")
            continue
        compared += 1
        (folder / "mutators.yaml").rename(tmp_path / f"{round_.name}-mutators.yaml")
        unmutated = _run([str(gator), "expand", "--filename", str(folder), "--format", fmt])
        mutated += unmutated.returncode == 0 and unmutated.stdout != theirs.stdout
        resultants += theirs.stdout.count("\nkind: ") + theirs.stdout.startswith("apiVersion")
        if (ours.returncode, ours.stdout) != (0, theirs.stdout):
            different.append(
                f"{round_.name} ({fmt}): celkeeper exit {ours.returncode}, stderr {ours.stderr.strip()!r}\n"
                f"--- gator\n{theirs.stdout[:1500]}\n--- celkeeper\n{ours.stdout[:1500]}"
            )
    summary = (
        f"{compared} rounds compared ({resultants} YAML resultants, {mutated} rounds changed by their "
        f"mutators), {failed} refused by gator"
    )
    print(summary)
    assert not different, f"{len(different)} differ; {summary}:\n" + "\n".join(different[:3])
    assert compared >= 20, summary  # the generated mutators include ones gator refuses, on purpose
    assert resultants >= 150, summary
    assert mutated >= compared // 2, summary  # the mutators changed what was expanded (not vacuous)
