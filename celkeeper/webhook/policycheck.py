"""POST /v1/admitpolicy: celkeeper's own objects checked when they are applied (★ where Gatekeeper is silent).

    problems, notes = check_policy_request(request, policies, compiler)     # pure
    PolicyAdmission(live, mode).handle(body) -> Answer                       # the route

A ConstraintTemplate is refused when it is malformed, when a CEL expression does not compile (line:col in
the expression), when its parameter schema cannot make a structural constraint CRD, or when an update
changes its kind (the constraints of the old kind would be orphaned). A constraint is refused when its
template's parameter schema rejects its parameters, when its match is invalid or when its enforcement
action is unknown. A Gatekeeper mutator (mutations.gatekeeper.sh) is refused as Gatekeeper's validating
webhook refuses it (and as the API server would with its CRD: the schema, unknown fields), with
Gatekeeper's own checks (celkeeper.mutation.check_mutator), and when it reads external data, which
celkeeper cannot call. Every problem is one line: `<field path>: <message>`.

Gatekeeper's admission only refuses templates it cannot make a CRD for and constraints its schema
rejects; a template whose code does not compile is accepted and reports the error in its status.
celkeeper refuses earlier, as an explicit admission policy: `--policy-validation=warn` turns each refusal
into an admission warning (the object is stored, and loaded as Gatekeeper would load it). celkeeper's
own loading never refuses what Gatekeeper would load; this check only answers the API server.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from celkeeper.constraints import parse_constraint
from celkeeper.crds import constraint_crd
from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError
from celkeeper.match import parse_match
from celkeeper.model import JsonValue
from celkeeper.mutation import GROUP as MUTATOR_GROUP
from celkeeper.mutation import KINDS as MUTATOR_KINDS
from celkeeper.mutation import check_mutator
from celkeeper.policy import PolicySet
from celkeeper.templates import TemplateCompiler
from celkeeper.templates.spec import CELKEEPER_GROUP, GATEKEEPER_GROUP, KIND
from celkeeper.webhook.admission import Answer, review_answer, review_request
from celkeeper.webhook.live import LivePolicies

log = logging.getLogger("celkeeper.webhook")

TEMPLATE_GROUPS = (CELKEEPER_GROUP, GATEKEEPER_GROUP)
CONSTRAINT_GROUPS = ("constraints.celkeeper.io", "constraints.gatekeeper.sh")
KIND_PATH = "spec.crd.spec.names.kind"


def _line(err: CelkeeperError) -> str:
    where = err.location
    path = where.path or ""
    message = err.message
    if where.line is not None and where.file is None and path:
        message = f"{message} (line {where.line}, column {where.column or 1})"
    return f"{path}: {message}" if path else message


def _kind_of(obj: Mapping[str, JsonValue] | None) -> str | None:
    node: Any = obj
    for key in ("spec", "crd", "spec", "names", "kind"):
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, str) else None


def check_policy_request(
    request: Mapping[str, JsonValue], policies: PolicySet | None, compiler: TemplateCompiler
) -> tuple[list[str], list[str]]:
    """(problems, notes) for one admission request; problems refuse it, notes are only warnings."""
    if request.get("operation") not in ("CREATE", "UPDATE"):
        return [], []
    obj = request.get("object")
    kind = request.get("kind") if isinstance(request.get("kind"), Mapping) else {}
    assert isinstance(kind, Mapping)
    if not isinstance(obj, Mapping):
        return [], []
    group = kind.get("group")
    if group in TEMPLATE_GROUPS and kind.get("kind") == KIND:
        return _check_template(obj, request.get("oldObject"), compiler), []
    if group in CONSTRAINT_GROUPS:
        return _check_constraint(obj, policies)
    if group == MUTATOR_GROUP and kind.get("kind") in MUTATOR_KINDS:
        return _unique([_line(err) for err in check_mutator(Document.from_object(dict(obj), file=""))]), []
    return [], []


def _check_template(obj: Mapping[str, JsonValue], old: Any, compiler: TemplateCompiler) -> list[str]:
    document = Document.from_object(dict(obj), file="")
    template, errors = compiler.load(document)
    problems = [_line(err) for err in errors]
    if template is not None:
        try:
            constraint_crd(dict(obj))
        except CelkeeperError as err:
            problems.append(_line(err))
    old_kind = _kind_of(old) if isinstance(old, Mapping) else None
    new_kind = _kind_of(obj)
    if old_kind and new_kind and old_kind != new_kind:
        problems.append(
            f"{KIND_PATH}: the kind cannot change ({old_kind} -> {new_kind}): the constraints of {old_kind} "
            "would be left without a template; delete the template and create the new one"
        )
    return _unique(problems)


def _check_constraint(
    obj: Mapping[str, JsonValue], policies: PolicySet | None
) -> tuple[list[str], list[str]]:
    document = Document.from_object(dict(obj), file="")
    kind = document.kind
    templates = policies.templates if policies is not None else {}
    validators = {template.kind: template.parameters for template in templates.values()}
    if kind not in validators:
        return [], [
            f"the template of {kind} is not loaded by this celkeeper pod yet: the constraint was "
            "not checked at admission (its status will show any problem)"
        ]
    constraint, errors = parse_constraint(document, validators)
    problems = [_line(err) for err in errors]
    if constraint is not None:
        _, match_errors = parse_match(constraint.match, document)
        problems.extend(_line(err) for err in match_errors)
    return _unique(problems), []


def _unique(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))


def describe(request: Mapping[str, JsonValue]) -> str:
    kind = request.get("kind") if isinstance(request.get("kind"), Mapping) else {}
    assert isinstance(kind, Mapping)
    return f"{kind.get('kind', 'object')} {request.get('name') or ''}".strip()


class PolicyAdmission:
    """The route: an AdmissionReview in, an answer out (refusal, or warnings with `mode` "warn")."""

    def __init__(self, live: LivePolicies, mode: str) -> None:
        self.live = live
        self.mode = mode

    def handle(self, body: bytes) -> Answer:
        parsed = review_request(body)
        if isinstance(parsed, Answer):
            return parsed
        raw, uid = parsed
        loaded = self.live.current or self.live.wait_loaded(1.0)
        try:
            problems, notes = check_policy_request(
                raw, loaded.policies if loaded else None, self.live.compiler()
            )
        except Exception as err:  # a bug must not block policy changes: allow, say why
            log.error("internal error checking %s (uid %s): %s", describe(raw), uid, err, exc_info=err)
            return Answer(
                200,
                review_answer(
                    uid,
                    True,
                    warnings=[f"celkeeper could not check {describe(raw)} (internal error, logged)"],
                ),
            )
        if not problems:
            return Answer(200, review_answer(uid, True, warnings=notes))
        what = describe(raw)
        if self.mode == "warn":
            lines = [f"{what} would be refused by celkeeper's policy validation: {p}" for p in problems]
            log.info("policy validation (warn) of %s: %s", what, "; ".join(problems))
            return Answer(200, review_answer(uid, True, warnings=[*lines, *notes]))
        log.info("refused %s: %s", what, "; ".join(problems))
        message = f"{what} is invalid:\n" + "\n".join(f"- {p}" for p in problems)
        refusal = review_answer(uid, False, code=422, reason="Invalid", message=message, warnings=notes)
        return Answer(200, refusal)
