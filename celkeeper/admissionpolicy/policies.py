"""A set of Kubernetes admission policies, evaluated by Kubernetes' own code in celkeeper's native library.

    with AdmissionPolicies.build(policies, params=..., namespaces=..., crds=...) as policies:
        for problem in policies.problems:   # what the API server would refuse (errors) or notes
            ...
        answer = policies.review({"operation": "CREATE", "object": obj})
        answer.allowed, answer.message, answer.warnings, answer.audit_annotations, answer.patched
        explained = policies.explain(request)   # the answer and why (celkeeper.admissionpolicy.explain)

The native library runs the API server's ValidatingAdmissionPolicy and MutatingAdmissionPolicy admission
plugins (k8s.io/apiserver/pkg/admission/plugin/policy, at the Kubernetes version the library is built
with) on the documents given: the policies, bindings and parameter objects are decoded, defaulted and
validated as the API server does on create, and each request goes through the mutating plugin (with its
reinvocation) then the validating one, with the API server's cost limits. An answer is what the API
server answers: the status it returns when it refuses (its message in Kubernetes' own words), the
warnings it sends, the audit annotations it records, the object after mutation.

The cel-python engine has no such code: these policies need the native library (AdmissionPolicyError
says so when it cannot load).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Self

import orjson

from celkeeper.documents import Document
from celkeeper.errors import AdmissionPolicyError, AdmissionPolicyNote
from celkeeper.model import JsonObject, JsonValue
from celkeeper.native.ffi import Library, LibraryUnavailable, load

#: the reason an answer's status gives when a policy refuses (the API server's defaults)
_UNKNOWN_FIELD = re.compile(r'unknown field "([^"]+)"')
#: where a CEL compile error is in its expression (cel-go's `ERROR: <input>:line:col: ...`)
_CEL_POSITION = re.compile(r"<input>:(\d+):(\d+):")


@dataclass(frozen=True)
class Answer:
    """What the API server answers a request (see the module docstring)."""

    allowed: bool
    #: the status the API server returns when it refuses (metav1.Status: code, reason, message, details)
    status: Mapping[str, JsonValue] | None
    warnings: tuple[str, ...]
    audit_annotations: Mapping[str, str]
    #: the object after the mutating policies, when they changed it
    patched: JsonObject | None
    #: the Namespace the request was evaluated in when none was given (as created without labels)
    assumed_namespace: str = ""
    #: the resource guessed for a kind that is neither built in nor defined by a CRD given
    guessed_resource: str = ""
    #: when patched: the object as the API server decoded it before admission (with its defaults)
    decoded: JsonObject | None = None

    @property
    def message(self) -> str:
        return str(self.status.get("message", "")) if self.status else ""

    @property
    def code(self) -> int:
        return int(self.status.get("code", 0) or 0) if self.status else 200

    @property
    def reason(self) -> str:
        return str(self.status.get("reason", "")) if self.status else ""

    @property
    def quiet(self) -> bool:
        """Allowed, with nothing to say: no warning, no audit annotation, no change."""
        return self.allowed and not self.warnings and not self.audit_annotations and self.patched is None

    def change(self, before: JsonValue) -> JsonValue:
        """What the mutating policies changed (a JSON merge patch) from the object as the API server decoded
        it (else `before`, the object given); None when they changed nothing."""
        if self.patched is None:
            return None
        return merge_patch(self.decoded or before or {}, self.patched)

    def assumptions(self, where: str = "the inputs") -> list[str]:
        """What the answer assumed that is not among `where`: a Namespace, a kind's resource."""
        found = []
        if self.assumed_namespace:
            found.append(
                f"Namespace {self.assumed_namespace} is not among {where}: the admission policies see it as "
                "the API server creates a Namespace without labels"
            )
        if self.guessed_resource:
            found.append(
                f"no CRD among {where} defines the kind of the {self.guessed_resource} objects: their "
                f"resource is taken to be {self.guessed_resource} (Kubernetes' guess from the kind)"
            )
        return found

    def as_json(self) -> JsonObject:
        out: JsonObject = {
            "allowed": self.allowed,
            "warnings": list(self.warnings),
            "auditAnnotations": dict(self.audit_annotations),
        }
        if self.status is not None:
            out["status"] = dict(self.status)
        if self.patched is not None:
            out["patchedObject"] = self.patched
        return out


@dataclass(frozen=True)
class Explained:
    """A request's answer and its trace (celkeeper.admissionpolicy.explain); the traces are the native
    library's JSON (admissionpolicy.BindingTrace: kind, policy, binding, applied, excluded, reason, error,
    failurePolicy, validationActions, paramRef, params)."""

    answer: Answer
    mutating: tuple[JsonObject, ...]
    validating: tuple[JsonObject, ...]
    #: the validating policies were called (False: a mutating policy denied the request first)
    validated: bool

    def to_json(self) -> JsonObject:
        return {
            "answer": self.answer.as_json(),
            "mutating": list(self.mutating),
            "validating": list(self.validating),
            "validated": self.validated,
        }


@dataclass
class AdmissionPolicies:
    """A set of admission policies ready to review requests (see the module docstring). Close it (or use
    it as a context manager) to release the native set."""

    library: Library
    handle: int
    #: the policies and bindings the set holds (`Kind/name`)
    names: tuple[str, ...]
    #: what the API server would refuse among the documents (errors) and what follows from the others (notes)
    problems: list[AdmissionPolicyError] = field(default_factory=list)
    #: releases the native set once: at close(), or when the set is no longer referenced (a webhook's set,
    #: replaced while requests may still use it, goes with the last of them)
    _release: weakref.finalize[Any, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.handle:
            self._release = weakref.finalize(self, self.library.release, self.handle)

    @classmethod
    def build(
        cls,
        policies: Sequence[Document],
        *,
        params: Sequence[Document] = (),
        namespaces: Sequence[Document] = (),
        crds: Sequence[Document] = (),
        library: Library | None = None,
    ) -> AdmissionPolicies:
        """A set from the documents; raises AdmissionPolicyError when the native library cannot run here."""
        if library is None:
            try:
                library = load()
            except LibraryUnavailable as err:
                raise AdmissionPolicyError(
                    "Kubernetes' admission policies are evaluated by Kubernetes' own code in celkeeper's "
                    f"native library, which cannot be loaded: {err}"
                ) from err
        groups: dict[str, Sequence[Document]] = {
            "policies": policies,
            "params": params,
            "namespaces": namespaces,
            "crds": crds,
        }
        payload = orjson.dumps({name: [d.data for d in docs] for name, docs in groups.items()})
        handle, reply = library.admission_policy_set(payload)
        if not handle:
            raise AdmissionPolicyError(f"cannot build the admission policy set: {reply.get('error')}")
        problems = [_problem(p, groups) for p in reply.get("problems") or []]
        return cls(library, handle, tuple(reply.get("policies") or ()), problems)

    def review(self, request: Mapping[str, JsonValue], timeout_ns: int = 0) -> Answer:
        """The API server's answer to an admission request (an AdmissionReview's request: operation,
        object, oldObject, userInfo, dryRun, options, and optionally kind, resource, subResource, name,
        namespace). Raises AdmissionPolicyError for a request it would not decode."""
        reply = self.library.admission_policy_review(self.handle, orjson.dumps(request), timeout_ns)
        if "error" in reply:
            raise AdmissionPolicyError(str(reply["error"]))
        return answer_of(reply["response"])

    def mutate(
        self,
        request: Mapping[str, JsonValue],
        webhook: Callable[[JsonObject], bytes],
        timeout_ns: int = 0,
    ) -> Answer:
        """The API server's answer to an admission request through its mutating chain with a mutating
        webhook after the policies (kube-apiserver's order), registered with reinvocationPolicy Never:
        `webhook` is given the object the API server would send it (as the policies left it) and
        returns its JSONPatch (JSON bytes; empty: no change), which is applied as the API server applies
        a webhook's; a policy with reinvocationPolicy IfNeeded then runs once more when the object
        changed after it (Kubernetes' own reinvoker and reinvocation context). The validating policies
        are not called. The answer's `patched` is the object after the whole chain. Raises
        AdmissionPolicyError for a request Kubernetes would not decode; what `webhook` raises is raised
        (the chain is abandoned)."""
        mutation, reply = self.library.admission_policy_mutate(self.handle, orjson.dumps(request), timeout_ns)
        if mutation > 0:
            try:
                patch = webhook(reply["object"])
                reply = self.library.admission_policy_mutate_continue(mutation, patch)
            finally:
                self.library.release(mutation)
        if "error" in reply:
            raise AdmissionPolicyError(str(reply["error"]))
        return answer_of(reply["response"])

    def explain(self, request: Mapping[str, JsonValue], timeout_ns: int = 0) -> Explained:
        """`review`'s answer with its trace (celkeeper.admissionpolicy.explain): per policy and binding,
        whether it applied and why not, the parameters, matchConditions, validations, audit annotations
        and mutations. Raises AdmissionPolicyError for a request the API server would not decode."""
        reply = self.library.admission_policy_explain(self.handle, orjson.dumps(request), timeout_ns)
        if "error" in reply:
            raise AdmissionPolicyError(str(reply["error"]))
        explanation = reply["explanation"]
        return Explained(
            answer=answer_of(explanation["response"]),
            mutating=tuple(explanation.get("mutating") or ()),
            validating=tuple(explanation.get("validating") or ()),
            validated=bool(explanation.get("validated")),
        )

    def review_many(
        self, requests: Sequence[Mapping[str, JsonValue]], timeout_ns: int = 0
    ) -> list[Answer | AdmissionPolicyError]:
        """`review` of each request, answered concurrently on the machine's cores; a request the API server
        would not decode has its AdmissionPolicyError in its place."""
        if not requests:
            return []
        replies = self.library.admission_policy_review_batch(
            self.handle, orjson.dumps(list(requests)), timeout_ns
        )
        if isinstance(replies, dict):
            raise AdmissionPolicyError(str(replies.get("error")))
        return [
            AdmissionPolicyError(str(r["error"])) if "error" in r else answer_of(r["response"])
            for r in replies
        ]

    def close(self) -> None:
        if self._release is not None:
            self._release()
        self.handle = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def merge_patch(before: Any, after: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `before` into `after`: what a mutation changed."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return after
    patch: dict[str, Any] = {}
    for key in before.keys() - after.keys():
        patch[key] = None
    for key, value in after.items():
        if key not in before:
            patch[key] = value
        elif before[key] != value:
            patch[key] = merge_patch(before[key], value)
    return patch


def answer_of(response: Mapping[str, Any]) -> Answer:
    status = response.get("status")
    patched = response.get("object") if response.get("mutated") else None
    return Answer(
        allowed=bool(response.get("allowed")),
        status=status if isinstance(status, dict) else None,
        warnings=tuple(str(w) for w in response.get("warnings") or ()),
        audit_annotations={str(k): str(v) for k, v in (response.get("auditAnnotations") or {}).items()},
        patched=patched if isinstance(patched, dict) else None,
        assumed_namespace=str(response.get("assumedNamespace") or ""),
        guessed_resource=str(response.get("guessedResource") or ""),
        decoded=response.get("decoded") if isinstance(response.get("decoded"), dict) else None,
    )


def _problem(problem: Mapping[str, Any], groups: Mapping[str, Sequence[Document]]) -> AdmissionPolicyError:
    """A problem of the native set, located in its document (the field Kubernetes names, else the field a
    strict decoding error names)."""
    documents = groups.get(str(problem.get("source")), ())
    index = int(problem.get("index", -1))
    message = str(problem.get("message", ""))
    cls = AdmissionPolicyNote if problem.get("severity") == "note" else AdmissionPolicyError
    path = str(problem.get("field") or "")
    if not path:
        unknown = _UNKNOWN_FIELD.search(message)
        if unknown:
            path = unknown.group(1)
    shown = _one_line(message)
    if 0 <= index < len(documents):
        document = documents[index]
        err = document.error(cls, shown, path, key=bool(path) and path == _unknown(message))
        if problem.get("source") == "policies":
            spec = document.data.get("spec") if isinstance(document.data, dict) else None
            target = spec.get("policyName") if isinstance(spec, dict) else None
            err.subject = (document.kind, document.name, target if isinstance(target, str) else "")
        found = _CEL_POSITION.search(message)
        where = document.expression_position(path, int(found[1]), int(found[2])) if found and path else None
        if where is not None:  # the compile error's line:col inside the expression, in the file
            err.location = replace(err.location, line=where[0], column=where[1])
    else:
        err = cls(shown)
    err.api_message = str(problem.get("status") or "")
    return err


def _one_line(message: str) -> str:
    """Kubernetes' message on one line: a CEL compile error's excerpt of the expression (` | ...` lines,
    which the location points into) left out."""
    lines = [line for line in message.splitlines() if not line.startswith(" | ")]
    return " ".join(line.strip() for line in lines if line.strip())


def _unknown(message: str) -> str | None:
    found = _UNKNOWN_FIELD.search(message)
    return found.group(1) if found else None
