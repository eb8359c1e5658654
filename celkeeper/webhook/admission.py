"""POST /v1/admit: an AdmissionReview (admission.k8s.io/v1) in, an AdmissionReview answer out.

Answer contract (Gatekeeper's):
- the response echoes request.uid;
- deny results: allowed false, status code 403 (reason Forbidden), message = the results as
  `[<constraint>] <message>`, one per line;
- warn results: response.warnings in the same form, allowed;
- dryrun results: allowed; logged and counted only;
- exempt namespaces (configuration), and namespaces labelled with the ignore label among those allowed
  to carry it (configuration): allowed, unchecked; the label on any other namespace changes nothing;
  deleting a Namespace is always checked (unless configured otherwise);
- an internal error answers by the failure mode (allow by default, deny when configured), is logged
  with the request uid, and never shows a traceback;
- evaluation has a deadline (Settings.eval_deadline, --eval-deadline): the engine reports the
  constraints it could not evaluate in time as evaluation errors under their failurePolicy; should
  evaluation overrun it anyway, the watchdog (webhook/deadline.py) interrupts it and the request is
  answered by the failure mode - the worker goes on serving;
- a body that is not an AdmissionReview: HTTP 400 with a one-line reason; an object nested deeper than
  orjson parses (1024 levels) but within what the API server stores and sends (10,000: apimachinery's
  JSON maxDepth) is decided like any other, as Gatekeeper decides it (`loads_review`);
- objects an ExpansionTemplate generates from the request's object are checked too (review.decide);
  an object that cannot be expanded is answered as Gatekeeper answers it: not allowed, code 500,
  `unable to expand object: ...`;
- with --log-denies a denial is logged in one line, with --log-denies=explain also explained
  (review.explain: the decision made again with a recorder, only for denials, after the decision,
  within the same deadline);
- with --export-decisions every violation (and every request answered by the failure mode; with
  --export-allowed every request allowed without one) is one JSON line (webhook/export.py), queued
  without waiting.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import orjson

from celkeeper.admissionpolicy import AdmissionPolicies
from celkeeper.errors import CelkeeperError
from celkeeper.expansion import ExpansionError
from celkeeper.model import Decision, EnforcementPoint, JsonObject, JsonValue
from celkeeper.review import AdmissionRequest, decide, parse_admission_review
from celkeeper.review.explain import explain
from celkeeper.review.explain_text import render_text
from celkeeper.review.mutate import Mutation, admission_review_response, mutate
from celkeeper.review.request import MAPPING
from celkeeper.settings import Settings
from celkeeper.webhook import admissionpolicies as admission_policies
from celkeeper.webhook.deadline import DeadlineExceeded, Watchdog
from celkeeper.webhook.export import DecisionExport
from celkeeper.webhook.live import LivePolicies, Loaded
from celkeeper.webhook.metrics import WebhookMetrics

log = logging.getLogger("celkeeper.webhook")

API_VERSION = "admission.k8s.io/v1"
#: the watchdog interrupts an evaluation this long after the deadline the engine itself keeps
BACKSTOP_GRACE = 0.5


@dataclass(frozen=True)
class Answer:
    status: int  # HTTP status
    body: JsonObject


def review_answer(
    uid: str,
    allowed: bool,
    *,
    code: int | None = None,
    reason: str | None = None,
    message: str | None = None,
    warnings: list[str] | None = None,
) -> JsonObject:
    response: JsonObject = {"uid": uid, "allowed": allowed}
    if code is not None or message:
        status: JsonObject = {}
        if code is not None:
            status["code"] = code
        if reason:
            status["reason"] = reason
        if message:
            status["message"] = message
        response["status"] = status
    if warnings:
        response["warnings"] = warnings
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def loads_review(body: bytes) -> Any:
    """The JSON of a request body (RFC 8259 in UTF-8, as the API server sends it); raises ValueError.

    orjson stops at 1024 levels of nesting, the API server at 10,000 (e.g. a custom resource with
    x-kubernetes-preserve-unknown-fields): such a body is parsed again at the API server's own limit,
    so that it is decided, not answered by the failure mode (with failurePolicy Ignore, deep nesting
    would otherwise let any object through)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as err:
        if not str(err).startswith("depth limit exceeded"):
            raise
    from celkeeper.kube.jsondeep import loads_deep  # only for such bodies: the API adapter is large

    return loads_deep(body)


def bad_request(message: str, status: int = 400) -> Answer:
    return Answer(status, {"code": status, "error": message})


def review_request(body: bytes) -> tuple[JsonObject, str] | Answer:
    """An AdmissionReview's request and its uid, or the 400 answer saying why the body is not one (the
    routes that answer reviews without the policies: /v1/admitlabel, /v1/admitpolicy)."""
    try:
        doc = loads_review(body)
    except ValueError as err:
        return bad_request(f"malformed JSON: {err}")
    raw = doc.get("request") if isinstance(doc, dict) else None
    uid = raw.get("uid") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(uid, str) or not uid:
        return bad_request("not a valid AdmissionReview: request.uid is missing")
    return raw, uid


def _namespace_matches(patterns: frozenset[str], namespace: str) -> bool:
    if namespace in patterns:
        return True
    return any(p.endswith("*") and namespace.startswith(p[:-1]) for p in patterns)


def _is_namespace(request: Mapping[str, JsonValue]) -> bool:
    kind = request.get("kind") or {}
    return isinstance(kind, MAPPING) and not kind.get("group") and kind.get("kind") == "Namespace"


def may_carry_ignore_label(settings: Settings, namespace: str) -> bool:
    """Whether the ignore label is honoured on (and may be set on) this namespace."""
    return _namespace_matches(settings.exempt_namespaces | settings.ignore_label_namespaces, namespace)


def exemption(request: Mapping[str, JsonValue], loaded: Loaded | None, settings: Settings) -> str | None:
    """Why this request is not checked at all, or None when it is."""
    is_namespace = _is_namespace(request)
    if is_namespace and request.get("operation") == "DELETE" and not settings.exempt_namespace_deletes:
        return None  # deleting a (protected) namespace is always checked
    namespace = request.get("namespace") or ""
    labels: Any = None
    if is_namespace:
        obj = request.get("object") or request.get("oldObject") or {}
        meta = obj.get("metadata") if isinstance(obj, MAPPING) else None
        meta = meta if isinstance(meta, MAPPING) else {}
        namespace = request.get("name") or meta.get("name") or namespace
        labels = meta.get("labels")
    elif namespace and loaded is not None:
        ns = loaded.namespace(namespace)
        meta = ns.get("metadata") if isinstance(ns, MAPPING) else None
        labels = meta.get("labels") if isinstance(meta, MAPPING) else None
    if not isinstance(namespace, str) or not namespace:
        return None
    if _namespace_matches(settings.exempt_namespaces, namespace):
        return f"namespace {namespace} is exempt"
    labelled = isinstance(labels, MAPPING) and settings.ignore_label in labels
    if labelled and may_carry_ignore_label(settings, namespace):
        return f"namespace {namespace} is labelled {settings.ignore_label}"
    return None


def label_guard(body: bytes, settings: Settings) -> Answer:
    """POST /v1/admitlabel: Gatekeeper's namespace label webhook (pkg/webhook/namespacelabel.go) for
    celkeeper's ignore label. Namespaces may be created or updated with the label only when they are
    allowed to carry it (--exempt-namespace, --ignore-label-namespace); DELETE and other kinds are
    allowed. Registered for CREATE and UPDATE of namespaces with failurePolicy Fail (docs)."""
    parsed = review_request(body)
    if isinstance(parsed, Answer):
        return parsed
    raw, uid = parsed
    if raw.get("operation") == "DELETE":
        return Answer(200, review_answer(uid, True))  # "Delete is always allowed"
    if not _is_namespace(raw):
        return Answer(200, review_answer(uid, True))  # "Not a namespace"
    obj = raw.get("object")
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        message = "while deserializing resource: the object has no metadata"
        return Answer(200, review_answer(uid, False, code=500, reason="InternalError", message=message))
    found = meta.get("name")
    name = found if isinstance(found, str) else ""
    labels = meta.get("labels")
    if may_carry_ignore_label(settings, name) or not isinstance(labels, Mapping):
        return Answer(200, review_answer(uid, True))
    if settings.ignore_label in labels:
        message = f"Only exempt namespace can have the {settings.ignore_label} label"
        return Answer(200, review_answer(uid, False, code=403, reason="Forbidden", message=message))
    return Answer(200, review_answer(uid, True))


class DeadlineError(RuntimeError):
    """Evaluation overran the deadline and was interrupted (answered by the failure mode)."""


class NotLoaded(RuntimeError):
    """A request came before this worker loaded its first snapshot (answered by the failure mode)."""


#: what answers a parsed review: (uid, its request as sent, the review, the request parsed) -> (the answer,
#: its metrics label)
Evaluate = Callable[[str, Mapping[str, JsonValue], Any, AdmissionRequest], tuple["Answer", str]]


class Admission:
    def __init__(
        self,
        live: LivePolicies,
        settings: Settings,
        metrics: WebhookMetrics,
        *,
        log_denies: bool = False,
        explain_denies: bool = False,
        first_load_wait: float = 0.0,
        timer: Callable[[], float] = time.perf_counter,
        export: DecisionExport | None = None,
    ) -> None:
        self.first_load_wait = first_load_wait
        self.export = export
        self.live = live
        self.settings = settings
        self.metrics = metrics
        self.log_denies = log_denies
        self.explain_denies = explain_denies
        self.timer = timer
        self.watchdog = Watchdog()

    def handle(self, body: bytes) -> Answer:
        """POST /v1/admit: the policies' decision."""
        return self._answer(body, self._decide, "the policies did not decide", export=True)

    def handle_mutation(self, body: bytes) -> Answer:
        """POST /v1/mutate: Gatekeeper's mutation webhook's answer (a JSONPatch when a mutator changes the
        object), with the same policies, exemptions, deadline and failure mode as POST /v1/admit."""
        return self._answer(body, self._mutate, "the mutators did not finish", export=False)

    def _answer(self, body: bytes, evaluate: Evaluate, late: str, *, export: bool) -> Answer:
        """Read the review, answer it with `evaluate` (the answer and its metrics label); a malformed
        review is a bad request, anything `evaluate` raises (an overrun deadline too) the failure mode's
        answer. `export`: errors go to the decision export too."""
        start = self.timer()
        try:
            doc = loads_review(body)
        except ValueError as err:
            return self._invalid(start, f"malformed JSON: {err}")
        raw = doc.get("request") if isinstance(doc, dict) else None
        raw = raw if isinstance(raw, dict) else {}
        op = raw.get("operation")
        operation = op if isinstance(op, str) else ""
        try:
            request = parse_admission_review(doc)
        except CelkeeperError as err:
            return self._invalid(start, f"not a valid AdmissionReview: {err}")
        except Exception as err:
            uid = raw.get("uid")
            if isinstance(uid, str) and uid:
                return self._internal_error(start, uid, operation, err)
            return self._invalid(start, f"not a valid AdmissionReview: {err}")
        uid = request.uid
        noted = raw if export else None
        try:
            answer, label = evaluate(uid, raw, doc, request)
        except DeadlineExceeded:
            overrun = DeadlineError(f"{late} within {self.settings.eval_deadline} s")
            return self._internal_error(start, uid, operation, overrun, noted)
        except Exception as err:
            return self._internal_error(start, uid, operation, err, noted)
        self.metrics.observe_request(label, operation, self.timer() - start)
        return answer

    def _policies(self, raw: Mapping[str, JsonValue]) -> Loaded | None:
        """The policies a request is answered with; None when it is exempt. NotLoaded before the first
        snapshot (after waiting first_load_wait for it)."""
        loaded = self.live.current or self.live.wait_loaded(self.first_load_wait)
        if exemption(raw, loaded, self.settings) is not None:
            return None
        if loaded is None:
            raise NotLoaded("no policies loaded yet (the first snapshot has not been published or read)")
        return loaded

    def _limit(self) -> AbstractContextManager[None]:
        """The watchdog's backstop for one evaluation under the deadline (none without a deadline)."""
        deadline = self.settings.eval_deadline
        return self.watchdog.limit(deadline + BACKSTOP_GRACE if deadline else 0)

    def _mutate(
        self, uid: str, raw: Mapping[str, JsonValue], doc: Any, request: AdmissionRequest
    ) -> tuple[Answer, str]:
        loaded = self._policies(raw)
        if loaded is None:
            return Answer(200, review_answer(uid, True)), "exempt"
        if loaded.admission is not None:
            return self._mutate_with_policies(
                uid, raw, doc, request, loaded=loaded, policies=loaded.admission
            )
        with self._limit():
            mutation = mutate(doc, loaded.policies, loaded.namespace, parsed=request, response_only=True)
        body = admission_review_response(mutation)
        if mutation.error:
            log.info("not mutated (uid %s, %s): %s", uid, _describe(raw), mutation.error)
            return Answer(200, body), "error"
        return Answer(200, body), ("mutated" if mutation.mutated else "unchanged")

    def _mutate_with_policies(
        self,
        uid: str,
        raw: Mapping[str, JsonValue],
        doc: Any,
        request: AdmissionRequest,
        *,
        loaded: Loaded,
        policies: AdmissionPolicies,
    ) -> tuple[Answer, str]:
        """/v1/mutate with the MutatingAdmissionPolicies enforced: the API server's mutating chain with
        Gatekeeper's mutators as its webhook after the policies (webhook.admissionpolicies.mutate)."""
        mutations: list[Mutation] = []

        def gatekeeper(obj: JsonObject) -> bytes:
            """Gatekeeper's mutation webhook, sent the object as the policies left it: its JSONPatch."""
            sent = {**doc, "request": {**raw, "object": obj}}
            parsed = parse_admission_review(sent)
            mutation = mutate(sent, loaded.policies, loaded.namespace, parsed=parsed, response_only=True)
            mutations.append(mutation)
            patch = mutation.response.get("patch")
            if mutation.error or not mutation.allowed or not isinstance(patch, str):
                return b""
            return base64.b64decode(patch)

        with self._limit():
            answer = admission_policies.mutate(policies, raw, gatekeeper, self.settings.eval_deadline)
        if not answer.allowed:
            if self.log_denies:
                log.info("denied (uid %s, %s): %s", uid, _describe(raw), answer.message.replace("\n", "; "))
            return Answer(200, admission_policies.refusal(uid, answer)), "deny"
        if mutations:
            mutation = mutations[0]
        else:  # the chain ended before the webhook (no object to send): Gatekeeper's answer as sent
            with self._limit():
                mutation = mutate(doc, loaded.policies, loaded.namespace, parsed=request, response_only=True)
        body = admission_review_response(mutation)
        if mutation.error or not mutation.allowed:
            log.info("not mutated (uid %s, %s): %s", uid, _describe(raw), mutation.error)
            return Answer(200, body), "error"
        body = admission_policies.with_patch(body, raw.get("object"), answer.patched)
        return Answer(200, body), ("mutated" if "patch" in body["response"] else "unchanged")

    def _decide(
        self, uid: str, raw: Mapping[str, JsonValue], doc: Any, request: AdmissionRequest
    ) -> tuple[Answer, str]:
        loaded = self._policies(raw)
        if loaded is None:
            return Answer(200, review_answer(uid, True)), "exempt"
        if loaded.admission is None:
            return self._constraints(uid, raw, request, loaded)
        with self._limit():  # the API server runs its policies before its webhooks
            answer = admission_policies.review(loaded.admission, raw, self.settings.eval_deadline)
        if not answer.allowed:
            if self.log_denies:
                log.info("denied (uid %s, %s): %s", uid, _describe(raw), answer.message.replace("\n", "; "))
            return Answer(200, admission_policies.refusal(uid, answer)), "deny"
        decided, label = self._constraints(uid, raw, request, loaded)
        body = admission_policies.with_answer(decided.body, answer)
        return Answer(decided.status, body), ("warn" if label == "allow" and answer.warnings else label)

    def _constraints(
        self, uid: str, raw: Mapping[str, JsonValue], request: AdmissionRequest, loaded: Loaded
    ) -> tuple[Answer, str]:
        deadline = self.settings.eval_deadline
        try:
            with self._limit():
                decision: Decision = decide(
                    request,
                    loaded.policies,
                    loaded.namespace,
                    EnforcementPoint.WEBHOOK,
                    clock=self.timer,
                    deadline=deadline,
                    data=loaded.data,
                )
        except ExpansionError as err:  # Gatekeeper answers an object it cannot expand with an error
            message = f"unable to expand object: {err.message}"
            log.info("not expanded (uid %s, %s): %s", uid, _describe(raw), message)
            body = review_answer(uid, False, code=500, reason="InternalError", message=message)
            return Answer(200, body), "error"
        self.metrics.observe_evaluations(decision.timings)
        for result in decision.results:
            self.metrics.count_violation(result.action.value, result.constraint_kind, result.constraint_name)
        if self.export is not None:
            self.export.decision(raw, decision.results, allowed=decision.allowed, policies=loaded.policies)
        for result in decision.dryruns:
            log.info("dryrun violation (uid %s, %s): %s", uid, _describe(raw), result.line())
        warnings = [r.line() for r in decision.warnings]
        if decision.allowed:
            return Answer(200, review_answer(uid, True, warnings=warnings)), ("warn" if warnings else "allow")
        message = decision.deny_message()
        if self.log_denies:
            log.info("denied (uid %s, %s): %s", uid, _describe(raw), message.replace("\n", "; "))
        if self.explain_denies:
            self._explain(uid, raw, request, loaded)
        body = review_answer(uid, False, code=403, reason="Forbidden", message=message, warnings=warnings)
        return Answer(200, body), "deny"

    def _explain(
        self, uid: str, raw: Mapping[str, JsonValue], request: AdmissionRequest, loaded: Loaded
    ) -> None:
        """Log why the request was denied (--log-denies=explain): the decision made again with a recorder,
        after the answer was decided, within the same deadline; a failure here (an overrun included) is
        logged and changes nothing."""
        deadline = self.settings.eval_deadline
        try:
            with self._limit():
                explanation = explain(
                    request,
                    loaded.policies,
                    loaded.namespace,
                    EnforcementPoint.WEBHOOK,
                    deadline=deadline,
                    data=loaded.data,
                )
            text = render_text(explanation)
        except (Exception, DeadlineExceeded) as err:
            log.warning("could not explain the denial of uid %s: %s", uid, str(err) or type(err).__name__)
            return
        log.info("denied (uid %s, %s), explained:\n%s", uid, _describe(raw), text.rstrip("\n"))

    def _invalid(self, start: float, message: str) -> Answer:
        self.metrics.observe_request("invalid", "", self.timer() - start)
        return bad_request(message)

    def _internal_error(
        self,
        start: float,
        uid: str,
        operation: str,
        err: Exception,
        raw: Mapping[str, JsonValue] | None = None,
    ) -> Answer:
        allow = self.settings.failure_mode == "allow"
        if self.export is not None and raw is not None:
            self.export.error(raw, str(err) or type(err).__name__, allowed=allow)
        log.error(
            "internal error answering uid %s (answered %s by the failure mode): %s",
            uid,
            "allowed" if allow else "denied",
            err,
            exc_info=None if isinstance(err, NotLoaded | DeadlineError) else err,
        )  # expected: one line
        self.metrics.observe_request("error", operation, self.timer() - start)
        note = f"celkeeper could not evaluate the policies (internal error, uid {uid})"
        if allow:
            body = review_answer(uid, True, warnings=[f"{note}; allowed by the failure mode"])
        else:
            message = f"{note}; denied by the failure mode"
            body = review_answer(uid, False, code=500, reason="InternalError", message=message)
        return Answer(200, body)


def _describe(raw: Mapping[str, JsonValue]) -> str:
    kind = raw.get("kind") if isinstance(raw.get("kind"), Mapping) else {}
    assert isinstance(kind, Mapping)
    name = raw.get("name") or ""
    ns = raw.get("namespace") or ""
    target = f"{ns}/{name}" if ns else str(name)
    return f"{raw.get('operation', '')} {kind.get('kind', '')} {target}".strip()
