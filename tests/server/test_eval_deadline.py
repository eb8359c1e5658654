"""The per-request evaluation deadline (issue 12), on a real `celkeeper serve` over TLS.

Before: the only bound was Gunicorn's --timeout; on the cel-python engine a nested comprehension over
3,000 containers ran until the master killed the worker (30 s, and every connection it held with
it). Now a request is answered, well-formed, within about --eval-deadline (here by the failure mode:
this engine keeps no budget of its own), by the same worker, which goes on serving.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.server.harness import ServeProcess, pod, review

pytestmark = pytest.mark.server

DEADLINE = 1.0

TEMPLATE = """\
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8suniquecontainers
spec:
  crd:
    spec:
      names:
        kind: K8sUniqueContainers
  targets:
    - target: admission.k8s.gatekeeper.sh
      code:
        - engine: K8sNativeValidation
          source:
            validations:
              - expression: >-
                  object.spec.containers.all(c, object.spec.containers.all(d,
                    c == d || c.name != d.name))
                message: "container names must be unique"
              - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
                message: "an owner label is required"
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sUniqueContainers
metadata:
  name: unique-containers
spec:
  match:
    kinds: [{apiGroups: [""], kinds: ["Pod"]}]
"""


@pytest.mark.parametrize("failure_mode", ["allow", "deny"])
def test_a_runaway_evaluation_is_answered_by_the_deadline_and_the_worker_lives(
    tmp_path: Path, failure_mode: str
) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "policies.yaml").write_text(TEMPLATE)
    args = ["--engine", "cel-python", "--eval-deadline", str(DEADLINE), "--failure-mode", failure_mode]
    server = ServeProcess(tmp_path / "srv", policies, workers=1, args=args).start()
    try:
        worker = server.worker_pids()
        huge = pod(labels={"owner": "a"})
        huge["spec"]["containers"] = [
            {"name": f"c{i}", "image": "registry.example.com/x:1"} for i in range(3000)
        ]
        started = time.monotonic()
        status, body = server.admit(review(huge, uid="uid-huge"))
        took = time.monotonic() - started
        assert status == 200 and body["response"]["uid"] == "uid-huge"  # a well-formed AdmissionReview
        assert took < DEADLINE + 3, f"answered after {took:.1f} s"
        answer = body["response"]
        if failure_mode == "allow":
            assert answer["allowed"] is True and "allowed by the failure mode" in answer["warnings"][0]
        else:
            assert answer["allowed"] is False and answer["status"]["code"] == 500
        assert server.worker_pids() == worker  # the same worker, alive
        _, body = server.admit(review(pod(labels={})))  # and it goes on deciding
        assert body["response"]["allowed"] is False
        assert "an owner label is required" in body["response"]["status"]["message"]
        log = server.log(400)
        assert f"the policies did not decide within {DEADLINE} s" in log and "Traceback" not in log
        assert "WORKER TIMEOUT" not in log
    finally:
        server.stop()


def test_the_deadline_has_a_sane_default_and_flag() -> None:
    from celkeeper.cli.main import build_parser
    from celkeeper.settings import Settings

    assert 0 < Settings().eval_deadline < 3  # below the webhook's timeoutSeconds (3 s in deploy/)
    args = build_parser().parse_args(["serve", "--cert", "c", "--key", "k", "--eval-deadline", "0.5"])
    assert args.eval_deadline == 0.5
    assert json.dumps(Settings().eval_deadline)
