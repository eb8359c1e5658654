"""Plain, immutable values shared by every layer: enforcement actions and points, results, decisions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeAlias

JsonValue: TypeAlias = Any
"""A decoded JSON or YAML value: None, bool, int, float, str, a list of values, or an object with
string keys. Deliberately `Any`, not a recursive union: these values come from orjson and the YAML
parser and are read by checking their shape where they are used (an object's metadata, a
constraint's parameters, a CEL activation), and the engines take them as they are; a union would put
a cast or an isinstance before each of hundreds of reads without making one of them safer."""

JsonObject: TypeAlias = dict[str, JsonValue]
"""A JSON object as decoded: a Kubernetes object, an AdmissionReview, a spec."""


class Action(StrEnum):
    """A constraint's enforcement action (spec.enforcementAction), as Gatekeeper spells it."""

    DENY = "deny"
    DRYRUN = "dryrun"
    WARN = "warn"
    SCOPED = "scoped"  # the real action comes from spec.scopedEnforcementActions per enforcement point


class EnforcementPoint(StrEnum):
    """Where a decision is made; scoped enforcement actions select by these names (Gatekeeper's)."""

    WEBHOOK = "validation.gatekeeper.sh"
    AUDIT = "audit.gatekeeper.sh"
    CLI = "gator.gatekeeper.sh"
    # the API server, through the generated ValidatingAdmissionPolicyBinding (celkeeper.vap): a constraint
    # whose scoped actions name only this point is enforced there and skipped by the webhook
    VAP = "vap.k8s.io"


class FailurePolicy(StrEnum):
    FAIL = "Fail"
    IGNORE = "Ignore"


@dataclass(frozen=True)
class Result:
    """One violation: a constraint that a reviewed object breaks, with the action that applies."""

    constraint_kind: str
    constraint_name: str
    action: Action  # deny, dryrun or warn (scoped already resolved for the enforcement point)
    message: str
    template: str = ""  # template name (lowercase kind)
    # a violation of an object an ExpansionTemplate generated from the reviewed one: the template's name
    # (the message starts with `[Implied by <it>]`) and its enforcementAction ("": the constraint's)
    implied_by: str = ""
    expansion_action: str = ""

    def line(self) -> str:
        """The text users see: `[<constraint>] <message>` (Gatekeeper's webhook format)."""
        return f"[{self.constraint_name}] {self.message}"


@dataclass(frozen=True)
class Decision:
    """What the policies say about one admission request."""

    results: tuple[Result, ...] = ()
    # per constraint kind: seconds spent evaluating it (for metrics); filled by review, read by webhook
    timings: tuple[tuple[str, float], ...] = field(default=(), compare=False)

    @property
    def denies(self) -> tuple[Result, ...]:
        return tuple(r for r in self.results if r.action is Action.DENY)

    @property
    def warnings(self) -> tuple[Result, ...]:
        return tuple(r for r in self.results if r.action is Action.WARN)

    @property
    def dryruns(self) -> tuple[Result, ...]:
        return tuple(r for r in self.results if r.action is Action.DRYRUN)

    @property
    def allowed(self) -> bool:
        return not self.denies

    def deny_message(self) -> str:
        return "\n".join(r.line() for r in self.denies)


def unreviewable(obj: object) -> str | None:
    """Why a plain object cannot be reviewed as gator reviews one (it is not a map, or has no apiVersion or
    no kind), or None."""
    if not isinstance(obj, Mapping):
        return "the object to review must be a map"
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not api_version:
        return "the object to review has no apiVersion"
    if not isinstance(kind, str) or not kind:
        return "the object to review has no kind"
    return None
