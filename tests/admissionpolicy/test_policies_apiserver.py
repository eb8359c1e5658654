"""celkeeper.admissionpolicy against the real kube-apiserver: the differential.

Every case of tests/admissionpolicy/corpus.py (policies x bindings x params x objects x operations: every
validation action and failure policy, compile and runtime errors, match conditions, variables, message
expressions, audit annotations, paramRef by name and selector with both parameterNotFoundActions,
namespace and object selectors, excluded resources, match policies, JSONPatch and ApplyConfiguration on
maps and lists with merge keys, reinvocation) is sent to a kube-apiserver at the native library's
Kubernetes version as a server-side dry run, and answered offline by celkeeper with the same policies,
parameters and Namespaces (as the API server stored them). The answers must be identical: allowed or
not, the status (code, reason, message, details), the warnings, the audit annotations the policies wrote,
and the object after mutation. The documents the API server refuses must be refused by celkeeper with the
API server's words.

Not compared, because the API server's registry sets them after admission: uid, resourceVersion,
creationTimestamp, managedFields and generation of the object (the corpus's policies neither read nor
write them). The objects of CREATE requests are first normalised by a dry run with no policy in force (the
API server's defaults and the fields its registry sets before validating admission, such as a Pod's
status), and the same normalised object goes to both sides.
"""

from __future__ import annotations

import copy
import json
import os
import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from celkeeper.admissionpolicy import AdmissionPolicies, Answer
from celkeeper.documents import Document
from celkeeper.errors import AdmissionPolicyNote
from tests.admissionpolicy import corpus
from tests.admissionpolicy.differential import (
    DRY_RUN,
    Kinds,
    Server,
    discover,
    meta,
    native_binaries,
    start_control_plane,
    strip_server_fields,
    wait_ready,
)
from tests.support.binaries import BinariesUnavailable
from tests.support.native import require_celgo
from tests.support.requirements import KUBE

pytestmark = pytest.mark.kube
ROOT = Path(__file__).resolve().parents[2]

VALIDATION_FAILURE = "validation.policy.admission.k8s.io/validation_failure"
OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    require_celgo()
    try:
        binaries = native_binaries()
    except BinariesUnavailable as err:
        KUBE.unavailable("the API server at the native library's version", err)
    cluster = start_control_plane(binaries, tmp_path_factory.mktemp("admissionpolicy"))
    try:
        srv = Server(cluster)
        for crd in corpus.CRDS:
            reply = srv.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            assert reply.code == 201, reply.body
        wait_ready(lambda: {"Widget", "Knob"} <= {k for _, k in discover(srv).by_kind}, "the CRDs served")
        yield srv
        srv.close()
    finally:
        cluster.stop()


def _user(srv: Server) -> dict[str, Any]:
    reply = srv.call(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    info = reply.body["status"]["userInfo"]
    return {k: v for k, v in info.items() if k in ("username", "uid", "groups", "extra")}


class RoundRun:
    """One round on the API server and offline (see tests/admissionpolicy/differential.py)."""

    def __init__(self, srv: Server, r: corpus.Round, workdir: Path) -> None:
        self.srv = srv
        self.r = r
        self.workdir = workdir
        self.kinds: Kinds = discover(srv)
        self.user = _user(srv)
        self.namespaces: list[dict[str, Any]] = []
        self.params: list[dict[str, Any]] = []
        self.stored: dict[str, dict[str, Any]] = {}  # case id -> the existing object as stored
        self.requests: dict[str, dict[str, Any]] = {}  # case id -> the offline request
        self.refused: dict[int, tuple[int, str]] = {}  # policy index -> the API server's (code, message)
        self.documents: list[dict[str, Any]] = []
        self.invalid: list[str] = []  # cases whose object the API server refuses with no policy in force

    # -- the API server side ---------------------------------------------------------------------------
    def setup(self) -> None:
        if self.r.crds:
            for crd in self.r.crds:
                reply = self.srv.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
                assert reply.code == 201, reply.body
            kinds = {c["spec"]["names"]["kind"] for c in self.r.crds}
            wait_ready(lambda: kinds <= {k for _, k in discover(self.srv).by_kind}, "the round's CRDs served")
            self.kinds = discover(self.srv)
        for ns in self.r.namespaces:
            reply = self.srv.call("POST", "/api/v1/namespaces", ns)
            assert reply.code == 201, reply.body
            self.namespaces.append(reply.body)
        for obj in self.r.setup:
            kind = self.kinds.of(obj)
            reply = self.srv.call("POST", kind.collection(meta(obj).get("namespace", "")), obj)
            assert reply.code == 201, reply.body
            self.params.append(reply.body)
        for case in self.r.cases:
            if case.existing is not None:
                kind = self.kinds.of(case.existing)
                reply = self.srv.call(
                    "POST", kind.collection(meta(case.existing)["namespace"]), case.existing
                )
                assert reply.code == 201, (case.id, reply.body)
                self.stored[case.id] = reply.body
            if case.operation == "CREATE":
                assert case.object is not None
                kind = self.kinds.of(case.object)
                reply = self.srv.call(
                    "POST", kind.collection(meta(case.object).get("namespace", "")), case.object, DRY_RUN
                )
                if reply.code != 201 and self.r.skip_invalid:
                    self.invalid.append(case.id)
                    continue
                assert reply.code == 201, (case.id, reply.body)
                normalised = reply.body
                for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
                    normalised["metadata"].pop(key, None)
                case.object = _unallocated(normalised, case.object)

    def install(self) -> None:
        self.documents = self.r.policies + corpus.refused_policies(self.r) + self._sentinels()
        for index, doc in enumerate(self.documents):
            path = "/apis/admissionregistration.k8s.io/v1/" + _plural(doc["kind"])
            reply = self.srv.call("POST", path, doc, {"fieldValidation": "Strict"})
            if reply.code != 201:
                self.refused[index] = (reply.code, reply.body.get("message", ""))
        sentinel = f"sentinel-{self.r.name}"
        probe = corpus.configmap(f"{sentinel}-probe", self.r.ns_a, sentinel, {"size": "1"})

        last: list[Any] = []

        def in_force() -> bool:
            reply = self.srv.call("POST", f"/api/v1/namespaces/{self.r.ns_a}/configmaps", probe, DRY_RUN)
            last[:] = [reply.code, reply.body]
            message = reply.body.get("message", "") if reply.code >= 400 else ""
            labels = meta(reply.body).get("labels", {}) if reply.code < 400 else {}
            del labels
            return "sentinel-ready" in message

        try:
            wait_ready(in_force, f"round {self.r.name}'s policies in force", timeout=180)
        except TimeoutError as err:
            raise AssertionError(f"{err}: the probe's last answer: {last}") from err

    def _sentinels(self) -> list[dict[str, Any]]:
        """A mutating policy labelling the probe, and a validating one denying it once labelled, reading a
        custom parameter when the round has one: the probe is denied with `sentinel-ready` once both
        plugins have loaded the round's policies and the API server's discovery knows the custom kinds."""
        name = f"sentinel-{self.r.name}"
        knobs = [o for o in self.r.setup if o["kind"] != "ConfigMap" and not meta(o).get("namespace")]
        mutate = "Object{metadata: Object.metadata{labels: {'sentinel': 'mutated'}}}"
        check = "object.metadata.labels.?sentinel.orValue('') != 'mutated'"
        docs = [
            corpus.mutating(
                f"{name}-m",
                name,
                {
                    "mutations": [
                        {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": mutate}}
                    ]
                },
            ),
            corpus.mapb(f"{name}-m", f"{name}-m"),
        ]
        if knobs:
            spec = {
                "paramKind": {"apiVersion": knobs[0]["apiVersion"], "kind": knobs[0]["kind"]},
                "validations": [
                    {"expression": check, "messageExpression": "'sentinel-ready ' + params.metadata.name"}
                ],
            }
            binding = {"paramRef": {"name": knobs[0]["metadata"]["name"], "parameterNotFoundAction": "Deny"}}
        else:
            spec = {"validations": [{"expression": check, "message": "sentinel-ready"}]}
            binding = {}
        docs += [
            corpus.vap(f"{name}-v", name, spec),
            corpus.vapb(f"{name}-v", f"{name}-v", ("Deny",), **binding),
        ]
        return docs

    def send(self) -> dict[str, dict[str, Any]]:
        answers: dict[str, dict[str, Any]] = {}
        for case in self.r.cases:
            if case.id in self.invalid:
                continue
            old = self.stored.get(case.id)
            if case.operation == "CREATE":
                obj = case.object
                assert obj is not None
                kind = self.kinds.of(obj)
                reply = self.srv.call("POST", kind.collection(meta(obj).get("namespace", "")), obj, DRY_RUN)
            elif case.operation == "UPDATE":
                assert old is not None and case.change is not None
                obj = case.change(copy.deepcopy(old))
                kind = self.kinds.of(obj)
                reply = self.srv.call(
                    "PUT", kind.path(meta(obj).get("namespace", ""), meta(obj)["name"]), obj, DRY_RUN
                )
            else:
                assert old is not None
                obj = None
                kind = self.kinds.of(old)
                reply = self.srv.call(
                    "DELETE", kind.path(meta(old).get("namespace", ""), meta(old)["name"]), None, DRY_RUN
                )
            self.requests[case.id] = {
                "operation": case.operation,
                "object": obj,
                "oldObject": old,
                "userInfo": self.user,
                "dryRun": True,
                "options": {
                    "apiVersion": "meta.k8s.io/v1",
                    "kind": OPTIONS_KIND[case.operation],
                    "dryRun": ["All"],
                },
            }
            answers[case.id] = {
                "code": reply.code,
                "body": reply.body,
                "warnings": reply.warnings,
                "audit": reply.audit_id,
            }
        for answer in answers.values():
            answer["annotations"] = self.srv.annotations(answer.pop("audit"))
        return answers

    # -- celkeeper's side ------------------------------------------------------------------------------
    def offline(self) -> AdmissionPolicies:
        docs = [Document.from_object(d, "round.yaml", i + 1) for i, d in enumerate(self.documents)]
        crds = [
            Document.from_object(
                self.srv.call(
                    "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{c['metadata']['name']}"
                ).body
            )
            for c in corpus.CRDS
        ]
        return AdmissionPolicies.build(
            docs,
            params=[Document.from_object(p) for p in self.params],
            namespaces=[Document.from_object(n) for n in self.namespaces],
            crds=crds,
        )


def test_the_embedded_discovery_is_the_api_servers(server: Server) -> None:
    """The built-in resources the native library maps kinds with (written by hack/admissionpolicy/
    discovery.py) are those this API server serves."""
    script = runpy.run_path(str(ROOT / "hack" / "admissionpolicy" / "discovery.py"))
    embedded = json.loads(Path(script["OUT"]).read_text(encoding="utf-8"))
    custom = {
        c["spec"]["group"]
        for c in server.call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions").body["items"]
    }
    served = [r for r in script["discover"](server.cluster) if r["group"] not in custom]
    assert served == embedded


def _unallocated(normalised: dict[str, Any], original: dict[str, Any]) -> dict[str, Any]:
    """A normalised Service without the addresses and ports its registry allocated (a dry run allocates
    them but does not keep them: sent again they are refused), those the original asked for kept."""
    if normalised.get("kind") != "Service" or normalised.get("apiVersion") != "v1":
        return normalised
    spec, asked = normalised.get("spec", {}), original.get("spec", {})
    for key in ("clusterIP", "clusterIPs", "healthCheckNodePort"):
        if key not in asked:
            spec.pop(key, None)
    for port, wanted in zip(spec.get("ports", []), asked.get("ports", []), strict=False):
        if "nodePort" not in wanted:
            port.pop("nodePort", None)
    return normalised


def _plural(kind: str) -> str:
    return kind.lower().removesuffix("y") + ("ies" if kind.endswith("Policy") else "s")


def _server_view(answer: dict[str, Any], policy_names: set[str], operation: str) -> dict[str, Any]:
    code, body = answer["code"], answer["body"]
    allowed = code < 400
    view: dict[str, Any] = {"allowed": allowed, "warnings": answer["warnings"]}
    view["auditAnnotations"] = {
        k: v
        for k, v in answer["annotations"].items()
        if k == VALIDATION_FAILURE or k.partition("/")[0] in policy_names
    }
    if allowed:
        if operation != "DELETE":
            view["object"] = strip_server_fields(body)
    else:
        view["status"] = {k: body.get(k) for k in ("code", "reason", "message", "details")}
    return view


def _offline_view(answer: Answer, request: dict[str, Any], operation: str) -> dict[str, Any]:
    view: dict[str, Any] = {"allowed": answer.allowed, "warnings": list(answer.warnings)}
    view["auditAnnotations"] = dict(answer.audit_annotations)
    if answer.allowed:
        if operation != "DELETE":
            view["object"] = strip_server_fields(
                answer.patched if answer.patched is not None else request["object"]
            )
    else:
        status = answer.status or {}
        view["status"] = {k: status.get(k) for k in ("code", "reason", "message", "details")}
    return view


def _normalised(value: Any) -> Any:
    """JSON as the API server writes it and as Go's encoder writes it compare the same (key order)."""
    return json.loads(json.dumps(value, sort_keys=True))


def test_celkeeper_answers_every_case_as_the_api_server(server: Server, tmp_path: Path) -> None:
    mismatches: list[dict[str, Any]] = []
    compared = refusals = skipped = 0
    only = os.environ.get("CELKEEPER_DIFF_ROUNDS")  # for debugging: the rounds to run (names, commas)
    for r in corpus.rounds():
        if only and r.name not in only.split(","):
            continue
        run = RoundRun(server, r, tmp_path)
        run.setup()
        run.install()
        answers = run.send()
        policies = run.offline()
        with policies:
            errors: dict[int | None, str] = {}
            for problem in policies.problems:
                if not isinstance(problem, AdmissionPolicyNote):
                    errors.setdefault(problem.location.document, problem.api_message)
            for index, doc in enumerate(run.documents):
                server_says = run.refused.get(index)
                ours = errors.get(index + 1)
                refusals += 1
                if (server_says is None) != (ours is None) or (server_says and server_says[1] != ours):
                    mismatches.append(
                        {"policy": doc["metadata"]["name"], "apiserver": server_says, "celkeeper": ours}
                    )
            names = {d["metadata"]["name"] for d in run.documents}
            skipped += len(run.invalid) + len(r.left_out)
            for case in r.cases:
                if case.id in run.invalid:
                    continue
                request = run.requests[case.id]
                server_view = _normalised(_server_view(answers[case.id], names, case.operation))
                try:
                    offline_view = _normalised(
                        _offline_view(policies.review(request), request, case.operation)
                    )
                except Exception as err:  # reported with the others
                    offline_view = {"error": str(err)}
                compared += 1
                if server_view != offline_view:
                    mismatches.append({"case": case.id, "apiserver": server_view, "celkeeper": offline_view})
    report = Path(os.environ.get("CELKEEPER_DIFF_REPORT", tmp_path / "mismatches.json"))
    report.write_text(json.dumps(mismatches, indent=1), encoding="utf-8")
    print(
        f"admission policy differential: {compared} cases, {refusals} documents, {len(mismatches)} "
        f"mismatches ({skipped} left out: objects the API server refuses with no policy in force, Services)"
    )
    assert compared >= 1000 or only
    assert not mismatches, (
        f"{len(mismatches)} of {compared} cases differ (all in {report}); first:\n"
        + json.dumps(mismatches[:3], indent=1)
    )
