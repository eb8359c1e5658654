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

import contextlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

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
from celkeeper.cli.background import Background
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

    def __init__(self, policies: AdmissionPolicies | Background[AdmissionPolicies]) -> None:
        """`policies`: the set, or its build under way (on a thread of its own: `policies` waits for it)."""
        self._built = policies if isinstance(policies, AdmissionPolicies) else None
        self._building = policies if isinstance(policies, Background) else None
        self._reported = False
        self._noted: set[str] = set()
        #: the batch `submit` fills, and those sent and not yet waited for (oldest first)
        self._filling: _Batch | None = None
        self._in_flight: list[_Batch] = []

    @property
    def policies(self) -> AdmissionPolicies:
        """The set (waiting for its build; raises AdmissionPolicyError when the native library cannot run)."""
        if self._built is None:
            assert self._building is not None
            self._built = self._building.result()
        return self._built

    @property
    def problems(self) -> list[AdmissionPolicyError]:
        return self.policies.problems

    @classmethod
    def build(
        cls,
        documents: Sequence[Document],
        objects: Iterable[Mapping[str, JsonValue]] = (),
        *,
        background: bool = False,
    ) -> AdmissionReviewer | None:
        """The reviewer of the admission policy documents among `documents`, with the parameter objects and
        Namespaces among `objects` (read only when a policy takes parameters or there are policies); None
        when there is no admission policy or binding. Raises AdmissionPolicyError when the native library
        cannot run (with `background`, the set is built on a thread of its own while the caller goes on:
        `policies` and `problems` wait for it, and raise it)."""
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

        def make() -> AdmissionPolicies:
            return AdmissionPolicies.build(
                policies, params=params, namespaces=list(namespaces.values()), crds=crds
            )

        return cls(Background(make) if background else make())

    def take_problems(self) -> list[AdmissionPolicyError]:
        """The set's problems, the first time they are asked for (then none): for a tool that reports them
        once its set is built, whenever that is."""
        if self._reported:
            return []
        self._reported = True
        return self.problems

    def submit(self, document: Document) -> Ticket:
        """Ask for the API server's answer to a document as a request. Requests are answered in batches of
        BATCH, each on a thread beside the caller's (the native library answers a batch on every core)
        while the caller reads on; `answer_to(ticket)` takes the answer. Raises CelkeeperError (located)
        for a document it cannot take."""
        try:
            request, before = _request(document)
        except CelkeeperError as err:
            raise err.at(file=document.file, document=document.index) from err.__cause__
        batch = self._filling
        if batch is None or batch.sent:
            batch = self._filling = _Batch(self)
        index = batch.add(request, before)
        if len(batch) >= BATCH:
            self._send(batch)
        return Ticket(batch, index, document.file, document.index)

    def answer_to(self, ticket: Ticket) -> Reviewed:
        """The answer a ticket of `submit` asked for; raises CelkeeperError (located) for a request the API
        server would not decode."""
        if not ticket.batch.sent:
            self._send(ticket.batch)
        found = ticket.batch.answer(ticket.index)
        if isinstance(found, CelkeeperError):
            raise found.at(file=ticket.file, document=ticket.document) from found.__cause__
        return found

    def _send(self, batch: _Batch) -> None:
        """Send a batch on its thread, once at most IN_FLIGHT others are under way (so that what is held
        stays a few batches, however many objects there are); its call follows the previous batch's (one
        call at a time uses every core)."""
        while len(self._in_flight) >= IN_FLIGHT:
            self._in_flight.pop(0).wait()
        batch.send(after=self._in_flight[-1] if self._in_flight else None)
        self._in_flight.append(batch)

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
        """Release the native set, once the batches under way are answered (an error of theirs was the
        caller's to take)."""
        for batch in self._in_flight:
            with contextlib.suppress(Exception):
                batch.wait()
        self._in_flight = []
        with contextlib.suppress(AdmissionPolicyError):  # a set never built: nothing to release
            self.policies.close()


#: requests answered in one call of the native library (on every core), and batches under way at once
BATCH = 256
IN_FLIGHT = 2
_ALLOWED = Reviewed(Answer(allowed=True, status=None, warnings=(), audit_annotations={}, patched=None), None)


class _Batch:
    """Requests answered together by the native library, on a thread of their own once sent (which waits
    for the reviewer's set, when it is still being built)."""

    def __init__(self, reviewer: AdmissionReviewer) -> None:
        self.reviewer = reviewer
        self.requests: list[Mapping[str, JsonValue]] = []
        self.befores: list[JsonObject | None] = []
        self.sent = False
        self._call: Background[list[Answer | AdmissionPolicyError]] | None = None
        #: the answers once taken: those with nothing to print or note shared (_ALLOWED)
        self._answers: list[Reviewed | CelkeeperError] | None = None

    def __len__(self) -> int:
        return len(self.requests)

    def add(self, request: Mapping[str, JsonValue], before: JsonObject | None) -> int:
        self.requests.append(request)
        self.befores.append(before)
        return len(self.requests) - 1

    def send(self, after: _Batch | None = None) -> None:
        """Answer the batch on a thread of its own, once the call of `after` (a batch sent before) ended."""
        self.sent = True

        def call() -> list[Answer | AdmissionPolicyError]:
            previous = after._call if after is not None else None  # None: taken, so ended
            if previous is not None:
                previous.join()
            return self.reviewer.policies.review_many(self.requests)

        self._call = Background(call)

    def wait(self) -> list[Reviewed | CelkeeperError]:
        if self._answers is None:
            assert self._call is not None
            answers = self._call.result()
            self._answers = [
                a if isinstance(a, CelkeeperError) else _reviewed(a, before)
                for a, before in zip(answers, self.befores, strict=True)
            ]
            self.requests, self.befores, self._call = [], [], None
        return self._answers

    def answer(self, index: int) -> Reviewed | CelkeeperError:
        return self.wait()[index]


def _reviewed(answer: Answer, before: JsonObject | None) -> Reviewed:
    """An answer as kept until it is taken: one with nothing to print (quiet) nor to note shared, the
    object given kept only to show what a mutation changed."""
    if answer.quiet and not answer.assumed_namespace and not answer.guessed_resource:
        return _ALLOWED
    return Reviewed(answer, before if answer.patched is not None else None)


@dataclass(frozen=True)
class Ticket:
    """A request `submit` took: its batch and place there, and where its document is."""

    batch: _Batch
    index: int
    file: str
    document: int


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
