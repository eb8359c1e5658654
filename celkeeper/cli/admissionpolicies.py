"""Kubernetes' admission policies among the offline tools' inputs (`test -f`, `explain`, `verify`): the
ValidatingAdmissionPolicies, MutatingAdmissionPolicies and their bindings found among the files, with their
parameter objects, Namespaces and CRDs, answered by Kubernetes' own code (celkeeper.admissionpolicy); with
`test --cluster`, those the cluster holds (cli.cluster), answered the same way.

Each object is a CREATE request (an AdmissionReview: its request), with the user its review names (none
for a plain object); the answer is the API server's: its status when it refuses (`denied (422 Invalid):
deployments.apps "web" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: ...`),
its warnings as kubectl prints them (`Warning: ...`), the audit annotations it records, and, when a
MutatingAdmissionPolicy changed the object, what changed (a JSON merge patch; the whole object with -o json).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from celkeeper.admissionpolicy import (
    AdmissionPolicies,
    Answer,
    Explained,
    is_admission_input,
    is_admission_policy_document,
    is_crd_document,
    is_param,
    merge_patch,
    param_kinds,
    trace_lines,
)
from celkeeper.documents import Document
from celkeeper.errors import AdmissionPolicyError, AdmissionPolicyNote, CelkeeperError
from celkeeper.gator.reviews import checked_request, is_admission_review
from celkeeper.gator.violation import Violation
from celkeeper.model import JsonObject, JsonValue

#: the names a file holding one of these documents has in its text (cli.inputs' first pass)
TEXT_NAMES = (b"AdmissionPolicy", b"CustomResourceDefinition")

_DENIAL = re.compile(
    r"(ValidatingAdmissionPolicy|MutatingAdmissionPolicy|policy) '([^']+)'(?: with binding '([^']+)')?"
)
_WARNING = re.compile(
    r"Validation failed for ValidatingAdmissionPolicy '([^']+)' with binding '([^']+)': (.*)", re.S
)


def wanted(document: Document) -> bool:
    """A document the admission policies are built from (a policy, a binding, a CRD)."""
    return is_admission_input(document)


@dataclass(frozen=True)
class Reviewed:
    """An object's answer: what is printed about it, whether it is denied."""

    answer: Answer
    before: JsonObject | None

    @property
    def denied(self) -> bool:
        return not self.answer.allowed

    @property
    def quiet(self) -> bool:
        return self.answer.quiet

    def lines(self) -> list[tuple[str, str]]:
        """(action, text) for each thing the API server answers: deny, warn, audit, mutate."""
        a = self.answer
        out: list[tuple[str, str]] = []
        if not a.allowed:
            out.append(("deny", f"denied ({a.code} {a.reason}): {a.message}"))
        out += [("warn", f"Warning: {w}") for w in a.warnings]
        out += [("audit", f"audit annotation {k}: {v}") for k, v in sorted(a.audit_annotations.items())]
        if a.patched is not None:
            patch = merge_patch(a.decoded or self.before or {}, a.patched)
            out.append(("mutate", f"mutated: {json.dumps(patch, sort_keys=True, separators=(',', ':'))}"))
        return out

    def violations(self) -> list[Violation]:
        """The answer as the offline tools' results (-o junit, -o sarif): a denial, each warning."""
        a = self.answer
        found = []
        if not a.allowed:
            match = _DENIAL.search(a.message)
            kind = match.group(1) if match else "AdmissionPolicy"
            name = (match.group(3) or match.group(2)) if match else ""
            found.append(Violation(a.message, "deny", (), (kind, name)))
        for w in a.warnings:
            match = _WARNING.match(w)
            found.append(
                Violation(w, "warn", (), ("ValidatingAdmissionPolicy", match.group(2) if match else ""))
            )
        return found

    def to_json(self) -> JsonObject:
        return self.answer.as_json()


@dataclass(frozen=True)
class AdmissionExplained:
    """An object's answer with its trace (`celkeeper explain`): what is printed about it."""

    document: Document
    explained: Explained
    before: JsonObject | None

    @property
    def allowed(self) -> bool:
        return self.explained.answer.allowed

    def text(self) -> str:
        """The verdict and the answer as `test -f` prints it, then the trace, policy by policy."""
        a = self.explained.answer
        verdict = "allowed" if a.allowed else "DENIED"
        lines = [f"{self._what()} (at the API server's admission policies): {verdict}"]
        answered = Reviewed(a, self.before).lines()
        lines += [f"  {text}" for _, text in answered] or ["  allowed, unchanged"]
        lines.append("")
        lines += trace_lines(self.explained)
        return "\n".join(lines) + "\n"

    def to_json(self) -> JsonObject:
        out = self.explained.to_json()
        a = self.explained.answer
        if a.patched is not None:
            answer = out["answer"]
            assert isinstance(answer, dict)
            answer["patch"] = merge_patch(a.decoded or self.before or {}, a.patched)
        return out

    def _what(self) -> str:
        data = self.document.data
        obj = data
        if is_admission_review(self.document) and isinstance(data, dict):
            request = data.get("request")
            obj = (request.get("object") or request.get("oldObject")) if isinstance(request, dict) else None
        if not isinstance(obj, dict):
            return "the request"
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        namespace = f"{meta['namespace']}/" if meta.get("namespace") else ""
        return f"{obj.get('kind', 'object')} {namespace}{meta.get('name', '')}"


class AdmissionReviewer:
    """The admission policies among the inputs, and the requests the offline tools make of them."""

    def __init__(self, policies: AdmissionPolicies) -> None:
        self.policies = policies
        self.problems: list[AdmissionPolicyError] = list(policies.problems)
        self._noted: set[str] = set()
        self._answers: dict[Place, Reviewed | CelkeeperError | object] = {}
        #: the notes of the answers `prepare` made (take_notes'), for the tool to print
        self.early_notes: list[str] = []

    @classmethod
    def build(
        cls, documents: Sequence[Document], objects: Iterable[Mapping[str, JsonValue]] = ()
    ) -> AdmissionReviewer | None:
        """The reviewer of the admission policy documents among `documents`, with the parameter objects and
        Namespaces among `objects` (read only when a policy takes parameters or there are policies); None
        when there is no admission policy or binding. Raises AdmissionPolicyError when the native library
        cannot run."""
        policies = [d for d in documents if is_admission_policy_document(d)]
        if not policies:
            return None
        crds = [d for d in documents if is_crd_document(d)]
        kinds = param_kinds(policies)
        params: list[Document] = []
        namespaces: dict[str, Document] = {}
        for obj in objects:
            if is_param(dict(obj), kinds):
                params.append(Document.from_object(dict(obj)))
            if obj.get("apiVersion") == "v1" and obj.get("kind") == "Namespace":
                meta = obj.get("metadata")
                name = meta.get("name") if isinstance(meta, Mapping) else None
                if isinstance(name, str) and name:
                    namespaces[name] = Document.from_object(dict(obj))  # the last of a name wins
        return cls(
            AdmissionPolicies.build(policies, params=params, namespaces=list(namespaces.values()), crds=crds)
        )

    def prepare(self, pieces: Iterable[Any], batch: int = 256) -> None:
        """Answer the objects among `pieces` (cli.inputs' pieces) ahead, in batches the native library
        answers on every core; `review` then takes each object's answer by its place (file, document,
        item). Only what is printed is kept (an object the policies have nothing to say about: its place)."""
        from celkeeper.cli.inputs import document_of
        from celkeeper.documents.stream import Streamed

        pending: list[tuple[Place, Mapping[str, JsonValue], JsonObject | None]] = []
        for piece in pieces:
            if not isinstance(piece, Streamed):
                continue
            place = (piece.file, piece.document, piece.item)
            try:
                request, before = _request(document_of(piece))
            except CelkeeperError as err:
                self._answers[place] = err
                continue
            pending.append((place, request, before))
            if len(pending) >= batch:
                self._answer(pending)
                pending = []
        self._answer(pending)

    def _answer(self, pending: Sequence[tuple[Place, Mapping[str, JsonValue], JsonObject | None]]) -> None:
        answers = self.policies.review_many([request for _, request, _ in pending])
        for (place, _, before), answer in zip(pending, answers, strict=True):
            if isinstance(answer, CelkeeperError):
                self._answers[place] = answer
                continue
            reviewed = Reviewed(answer, before)
            self.early_notes += self.take_notes(reviewed)
            self._answers[place] = QUIET if reviewed.quiet else reviewed

    def review(self, document: Document, place: Place | None = None) -> Reviewed:
        """The API server's answer to a document as a request (answered ahead by `prepare` when `place` is
        its place there); raises CelkeeperError (located) for one it cannot take."""
        try:
            found = self._answers.pop(place, None) if place is not None else None
            if isinstance(found, CelkeeperError):
                raise found
            if found is QUIET:
                return Reviewed(_ALLOWED, None)
            if isinstance(found, Reviewed):
                return found
            request, before = _request(document)
            return Reviewed(self.policies.review(request), before)
        except CelkeeperError as err:
            raise err.at(file=document.file, document=document.index) from err.__cause__

    def answer(self, request: Mapping[str, JsonValue], before: JsonObject | None) -> Reviewed:
        """The API server's answer to a request made elsewhere (`test --cluster`'s, for a manifest as the
        cluster would receive it); raises CelkeeperError for one it cannot take."""
        return Reviewed(self.policies.review(request), before)

    def take_notes(self, reviewed: Reviewed) -> list[str]:
        """What an answer assumed that was not among the inputs, said once per run."""
        new = [n for n in reviewed.answer.assumptions() if n not in self._noted]
        self._noted.update(new)
        return new

    def notes(self) -> list[AdmissionPolicyError]:
        return [p for p in self.problems if isinstance(p, AdmissionPolicyNote)]

    def errors(self) -> list[AdmissionPolicyError]:
        return [p for p in self.problems if not isinstance(p, AdmissionPolicyNote)]

    def close(self) -> None:
        self.policies.close()


#: where an object is among the inputs: file, document, item of a List (None for a whole document)
Place = tuple[str, int, int | None]
#: an answer with nothing to print (allowed, no warning, no annotation, unchanged)
QUIET = object()
_ALLOWED = Answer(allowed=True, status=None, warnings=(), audit_annotations={}, patched=None)


def _request(document: Document) -> tuple[Mapping[str, JsonValue], JsonObject | None]:
    """The request of a document (a plain object: a CREATE; an AdmissionReview: its request), and the
    object as given."""
    if is_admission_review(document):
        request = dict(checked_request(document))
        request.pop("uid", None)
        before = request.get("object")
    elif isinstance(document.data, dict):
        request = {"operation": "CREATE", "object": document.data}
        before = document.data
    else:
        raise CelkeeperError("not an object")
    return request, before if isinstance(before, dict) else None
