"""A template that builds huge strings cannot take a webhook pod over its memory limit (issue 29).

`celkeeper serve` runs in a memory cgroup limited to 512 MiB, as Kubernetes limits a container. Careless
templates double a string through variables (a literal: Kubernetes' cost model charges the
concatenation; a string of the object, so `+` is chosen at run time and cel-go v0.30 charges 1 for it,
which took a process to 24 GB; s.replace('', s), whose cost does not grow with its result) while other
requests are reviewed. Each hostile review must be answered with the cost budget's error under its
template's failurePolicy, the other reviews as usual and promptly, no worker may be lost (the kernel's
OOM killer would end it: the request then gets no answer and the registration's failurePolicy decides),
and the cgroup must stay under its limit. Root only (cgroups); the cel-go library's growth guard and its
soft memory limit (set from the cgroup's: celkeeper/native/go/main.go) are what is tested."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.support import cgroups
from tests.support.native import require_celgo
from tests.support.serve import POLICIES, ServeProcess, pod, review

pytestmark = pytest.mark.server

LIMIT = 512 * 1024 * 1024
HOSTILE = 48  # hostile reviews, sent with the others from 8 clients at once
CALM = 96
LATENCY_BOUND = 3.0  # seconds for a calm review while hostile ones are decided (a loaded machine)


def _template(kind: str, base: str, step: str, levels: int, failure_policy: str) -> dict[str, Any]:
    variables = [{"name": "v0", "expression": base}]
    variables += [
        {"name": f"v{i}", "expression": step.format(prev=f"variables.v{i - 1}")} for i in range(1, levels + 1)
    ]
    source = {
        "failurePolicy": failure_policy,
        "variables": variables,
        "validations": [{"expression": f"size(variables.v{levels}) < 10", "message": "too long"}],
    }
    return {
        "apiVersion": "templates.gatekeeper.sh/v1",
        "kind": "ConstraintTemplate",
        "metadata": {"name": kind.lower()},
        "spec": {
            "crd": {"spec": {"names": {"kind": kind}}},
            "targets": [
                {
                    "target": "admission.k8s.gatekeeper.sh",
                    "code": [{"engine": "K8sNativeValidation", "source": source}],
                }
            ],
        },
    }


def _constraint(kind: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": kind,
        "metadata": {"name": kind.lower()},
        "spec": {"match": {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}], "namespaces": [namespace]}},
    }


#: (kind, namespace of the Pods it checks, template): 2^40 times 8 characters, were they made
HOSTILE_TEMPLATES = [
    ("DoubledLiteral", "typed", _template("DoubledLiteral", "'abcdefgh'", "{prev} + {prev}", 40, "Fail")),
    ("DoubledName", "dyn", _template("DoubledName", "object.metadata.name", "{prev} + {prev}", 40, "Fail")),
    (
        "DoubledIgnored",
        "ignored",
        _template("DoubledIgnored", "object.metadata.name", "{prev} + {prev}", 40, "Ignore"),
    ),
    (
        "Replaced",
        "replace",
        _template("Replaced", "object.metadata.name", "{prev}.replace('', {prev})", 6, "Fail"),
    ),
]


class CgroupServe(ServeProcess):
    """`celkeeper serve` started inside a memory cgroup (every process it forks stays in it)."""

    def __init__(self, *args: Any, cgroup: cgroups.MemoryCgroup, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cgroup = cgroup

    def argv(self) -> list[str]:
        return self.cgroup.wrap(super().argv())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[CgroupServe]:
    require_celgo()
    why = cgroups.writable()
    if why is not None:
        pytest.skip(f"needs root to make a memory cgroup: {why}")
    policies = tmp_path / "policies"
    policies.mkdir()
    for source in POLICIES.glob("*.yaml"):
        (policies / source.name).write_text(source.read_text())
    for kind, namespace, template in HOSTILE_TEMPLATES:
        (policies / f"{kind}.json").write_text(json.dumps(template))
        (policies / f"{kind}-constraint.json").write_text(json.dumps(_constraint(kind, namespace)))
    cgroup = cgroups.MemoryCgroup(f"celkeeper-test-{tmp_path.name}"[:60], LIMIT)
    # the default process model: one worker process, its event loops on two threads
    server = CgroupServe(tmp_path / "srv", policies, workers=1, threads=2, cgroup=cgroup)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        cgroup.remove()


def test_strings_doubled_by_a_template_are_refused_before_they_exhaust_the_pod(server: CgroupServe) -> None:
    workers = server.worker_pids()
    labels = {"owner": "a", "team": "b", "cost-center": "c"}
    hostile = [
        (namespace, json.dumps(review(pod(name="abcdefgh", namespace=namespace, labels=labels))).encode())
        for _kind, namespace, _template in HOSTILE_TEMPLATES
    ]
    calm_allowed = json.dumps(review(pod(namespace="calm", labels=labels))).encode()
    calm_denied = json.dumps(review(pod(namespace="calm", labels={}))).encode()

    def send(item: tuple[str, bytes]) -> tuple[str, int, dict[str, Any], float]:
        what, body = item
        started = time.monotonic()
        response = server.post("/v1/admit", body)
        return what, response.status_code, response.json(), time.monotonic() - started

    work = [hostile[i % len(hostile)] for i in range(HOSTILE)]
    work += [("calm", calm_allowed) if i % 2 else ("calm-denied", calm_denied) for i in range(CALM)]
    work = [work[i] for i in sorted(range(len(work)), key=lambda i: (i * 7919) % len(work))]  # interleaved
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, work))

    for what, status, body, seconds in answers:
        assert status == 200, (what, status, body)
        response = body["response"]
        message = str(response.get("status", {}).get("message", ""))
        if what == "calm":
            assert response["allowed"] is True, body
            assert seconds < LATENCY_BOUND, f"a calm review took {seconds:.1f} s"
        elif what == "calm-denied":
            assert response["allowed"] is False and "owner" in message, body
            assert seconds < LATENCY_BOUND, f"a calm review took {seconds:.1f} s"
        elif what == "ignored":  # the cost error under failurePolicy Ignore: no violation
            assert response["allowed"] is True, body
        else:  # the cost budget's error under failurePolicy Fail: a denial saying so
            assert response["allowed"] is False, body
            assert ("cost" in message and "budget" in message) or "cost limit" in message, body
    assert server.worker_pids() == workers, "a worker was lost"
    assert server.cgroup.oom_kills() == 0
    assert server.cgroup.peak() < LIMIT
    assert "out of memory" not in server.log(400)
