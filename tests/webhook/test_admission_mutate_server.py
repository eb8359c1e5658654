"""POST /v1/mutate through a real `celkeeper serve` over TLS, on both process models: the answer the
in-process app gives (tests/webhook/test_admission_mutate.py), which is the code proven against
Gatekeeper's mutation webhook (tests/e2e/gatekeeper), served from the policy folder's snapshot on the
worker's own route; /v1/admit and /v1/mutate on one kept-alive connection; a malformed body is a 400."""

from __future__ import annotations

import base64
import http.client
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from celkeeper.documents.document import Document
from celkeeper.mutation import MutationOptions, build_mutator_set
from celkeeper.review.mutate import mutate
from tests.support.native import require_celgo
from tests.support.serve import PROCESS_MODELS, ServeProcess

SUITE = Path(__file__).resolve().parents[1] / "e2e" / "gator" / "suites"
ME = "system:serviceaccount:celkeeper-system:celkeeper-webhook"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _review(obj: dict[str, Any], uid: str, username: str = "alice") -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": obj["kind"]},
            "resource": {"group": "", "version": "v1", "resource": obj["kind"].lower() + "s"},
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "operation": "CREATE",
            "userInfo": {"username": username},
            "object": obj,
        },
    }


def _ops(response: dict[str, Any]) -> list[str]:
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    # operations on map keys come in Go's random map order, as Gatekeeper's do
    return sorted(json.dumps(op, sort_keys=True) for op in patch)


@pytest.fixture(params=list(PROCESS_MODELS))
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServeProcess]:
    require_celgo()
    policies = tmp_path / "policies"
    policies.mkdir()
    shutil.copy(SUITE / "mutation" / "mutators.yaml", policies / "mutators.yaml")
    workers, threads = PROCESS_MODELS[request.param]
    args = [
        "--namespaces",
        str(SUITE / "mutation" / "namespace.yaml"),
        "--mutation-annotations",
        "--self-username",
        ME,
    ]
    proc = ServeProcess(tmp_path, policies, workers=workers, threads=threads, args=args).start()
    try:
        yield proc
    finally:
        proc.stop()


def test_the_served_patch_is_gatekeepers(server: ServeProcess) -> None:
    pod = _load(SUITE / "expansion" / "pod.yaml")
    documents = [
        Document.from_object(m, "mutators.yaml", i + 1)
        for i, m in enumerate(yaml.safe_load_all((SUITE / "mutation" / "mutators.yaml").read_text()))
        if m
    ]
    namespaces = {
        n["metadata"]["name"]: n
        for n in yaml.safe_load_all((SUITE / "mutation" / "namespace.yaml").read_text())
        if n
    }
    offline = build_mutator_set(documents, MutationOptions(annotations=True, self_username=ME))
    connection = http.client.HTTPSConnection("localhost", server.port, context=server.client_context())
    try:
        for i in range(4):  # one kept-alive connection, both routes in turn
            review = _review(pod, f"uid-{i}")
            connection.request("POST", "/v1/mutate", json.dumps(review), {"Content-Type": "application/json"})
            reply = connection.getresponse()
            body = json.loads(reply.read())
            assert reply.status == 200, body
            assert body["response"]["uid"] == f"uid-{i}" and body["response"]["allowed"] is True
            expected = mutate(review, offline, namespaces.get).response
            # the annotations name a fresh mutation id in each answer; every other operation is the same
            ours = [op for op in _ops(body["response"]) if "/metadata/annotations" not in op]
            theirs = [op for op in _ops(expected) if "/metadata/annotations" not in op]
            assert ours == theirs and ours, (ours, theirs)
            assert any("imagePullPolicy" in op for op in ours)
            connection.request("POST", "/v1/admit", json.dumps(review), {"Content-Type": "application/json"})
            admitted = connection.getresponse()
            assert admitted.status == 200 and json.loads(admitted.read())["response"]["allowed"] is True
    finally:
        connection.close()
    # the webhook's own user is left alone; a malformed body is the client's error
    status, body = _post(server, _review(pod, "uid-self", username=ME))
    assert status == 200 and "patch" not in body["response"], body
    response = server.post("/v1/mutate", b"{not json")
    assert response.status_code == 400, response.text


def _post(server: ServeProcess, review: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = server.post("/v1/mutate", json.dumps(review).encode())
    return response.status_code, response.json()
