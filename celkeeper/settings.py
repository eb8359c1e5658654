"""Settings: one immutable value built at the edge (CLI flags, environment) and passed down.

The core never reads the environment itself: the CLI builds Settings from flags and environment,
turning each enumerated flag into its `Literal` type with the parse functions here (argparse's
`choices` words the refusal users see; these are the check for every other caller).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, TypedDict, TypeVar, Unpack, get_args

EngineName = Literal["cel-go", "cel-python"]
"""A CEL engine: `cel-go` (Kubernetes' own CEL, a Go library) or `cel-python` (pure Python)."""

FailureMode = Literal["allow", "deny"]
"""The webhook's answer when it fails internally: allow (fail open) or deny (fail closed)."""

PolicyValidation = Literal["deny", "warn"]
"""What POST /v1/admitpolicy does with a broken template or constraint: deny it, or warn and let it in."""

ENGINES: tuple[EngineName, ...] = get_args(EngineName)
#: Kubernetes' own CEL, as Gatekeeper runs it (a Go library built by setup.py)
DEFAULT_ENGINE: EngineName = "cel-go"
#: pure Python: what runs when the cel-go library is not built
FALLBACK_ENGINE: EngineName = "cel-python"
FAILURE_MODES: tuple[FailureMode, ...] = get_args(FailureMode)
POLICY_VALIDATION: tuple[PolicyValidation, ...] = get_args(PolicyValidation)

_Choice = TypeVar("_Choice", bound=str)


def _one_of(text: object, choices: tuple[_Choice, ...], refusal: str) -> _Choice:
    for choice in choices:
        if text == choice:
            return choice
    raise ValueError(refusal)


def parse_engine(text: object) -> EngineName:
    """`text` as an engine name; ValueError (one line, naming the choices) for anything else."""
    return _one_of(text, ENGINES, f"unknown CEL engine {text!r}; choose one of {', '.join(ENGINES)}")


def parse_failure_mode(text: object) -> FailureMode:
    """`text` as a failure mode; ValueError (one line, naming the choices) for anything else."""
    return _one_of(text, FAILURE_MODES, f"failure mode must be 'allow' or 'deny', not {text!r}")


def parse_policy_validation(text: object) -> PolicyValidation:
    """`text` as a policy validation; ValueError (one line, naming the choices) for anything else."""
    return _one_of(text, POLICY_VALIDATION, f"policy validation must be 'deny' or 'warn', not {text!r}")


#: The largest AdmissionReview body a webhook accepts by default: controller-runtime's maxRequestSize,
#: what Gatekeeper's webhook accepts. An UPDATE's review carries the object and its old version, each
#: up to the API server's 3 MiB request limit (more as JSON than as stored); refusing a larger review
#: would answer it by the failure mode (with failurePolicy Ignore: let it through unchecked).
MAX_REVIEW_BYTES = 7 * 1024 * 1024


@dataclass(frozen=True)
class CelLimits:
    """Bounds on CEL sources, checked by the cel-python engine's front end before anything is
    evaluated (the cel-go engine has Kubernetes' own; both bound evaluations by a runtime cost budget).
    The defaults refuse nothing Gatekeeper accepts: cel-go's parser limits an expression to 100,000
    code points and has no smaller limit on its parts (literals, regular expressions)."""

    max_expression_length: int = 100_000
    """Characters in one expression (cel-go's parser's limit)."""
    max_ast_depth: int = 100
    """Nesting of the parsed expression."""
    max_comprehension_depth: int = 32
    """Comprehensions nested inside comprehensions (all/exists/map/...)."""
    max_literal_length: int = 100_000
    """Characters (or bytes) in one string or bytes literal."""
    max_aggregate_literal_size: int = 100_000
    """Elements in one list or map literal."""
    max_regex_length: int = 100_000
    """Characters of a literal regular expression."""


@dataclass(frozen=True)
class Settings:
    """How policies are enforced: built once by the CLI (`celkeeper serve`, `celkeeper audit`) and
    passed down to the informer, the webhook's workers and the audit. Construction checks every
    field (ValueError, one line)."""

    engine: EngineName = DEFAULT_ENGINE
    """The CEL engine that compiles and evaluates the templates (`--engine`)."""
    limits: CelLimits = field(default_factory=CelLimits)
    """Bounds on CEL sources (the cel-python engine's front end checks them)."""
    exempt_namespaces: frozenset[str] = frozenset()
    """Namespaces never checked (`prefix*` patterns allowed); they may also carry the ignore label
    (`--exempt-namespace`)."""
    ignore_label_namespaces: frozenset[str] = frozenset()
    """Namespaces where the ignore label is honoured (and may be set: /v1/admitlabel refuses it
    elsewhere); on any other namespace the label is ignored (`--ignore-label-namespace`)."""
    ignore_label: str = "admission.celkeeper.io/ignore"
    """The label that exempts a namespace (where honoured)."""
    exempt_namespace_deletes: bool = False
    """Whether deleting an exempt or ignore-labelled Namespace object is exempt too (default: it is
    checked; `--exempt-namespace-deletes`)."""
    failure_mode: FailureMode = "allow"
    """What the webhook answers when it fails internally: "allow" (fail open, Gatekeeper's default) or
    "deny" (`--failure-mode`)."""
    max_request_bytes: int = MAX_REVIEW_BYTES
    """The largest AdmissionReview body accepted (larger: 413; `--max-request-bytes`)."""
    eval_deadline: float = 2.0
    """Seconds the policies may take to decide one admission request (0: no deadline): below the
    webhook's registered timeoutSeconds (3 s in deploy/, 10 s by default), which also covers reading
    and writing it (`--eval-deadline`)."""
    mutation_annotations: bool = False
    """Whether POST /v1/mutate adds Gatekeeper's mutation annotations (`gatekeeper.sh/mutation-id`,
    `gatekeeper.sh/mutations`) to the objects it mutates (`--mutation-annotations`, Gatekeeper's flag)."""
    self_username: str = ""
    """The user whose requests POST /v1/mutate never mutates: celkeeper's own service account in the
    cluster, as Gatekeeper's mutation webhook leaves its own service account's requests alone
    (pkg/webhook/mutation.go, isGkServiceAccount); empty: every user's requests (`--self-username`)."""
    enforce_admission_policies: bool = False
    """Whether the webhook enforces Kubernetes' ValidatingAdmissionPolicies and MutatingAdmissionPolicies
    among its policies itself (for API servers that do not: `--enforce-admission-policies`)."""
    policy_validation: PolicyValidation = "deny"
    """celkeeper's own templates and constraints at apply time (POST /v1/admitpolicy): "deny" refuses
    broken ones, "warn" lets them in with admission warnings, Gatekeeper's leniency
    (`--policy-validation`)."""

    def __post_init__(self) -> None:
        parse_engine(self.engine)
        parse_failure_mode(self.failure_mode)
        if self.eval_deadline < 0:
            raise ValueError(f"the evaluation deadline cannot be negative ({self.eval_deadline})")
        parse_policy_validation(self.policy_validation)

    def with_(self, **changes: Unpack[SettingsChanges]) -> Settings:
        """A copy with the given fields changed (checked again)."""
        return replace(self, **changes)


class SettingsChanges(TypedDict, total=False):
    """The fields of Settings, each optional: what `Settings.with_` may change."""

    engine: EngineName
    limits: CelLimits
    exempt_namespaces: frozenset[str]
    ignore_label_namespaces: frozenset[str]
    ignore_label: str
    exempt_namespace_deletes: bool
    failure_mode: FailureMode
    max_request_bytes: int
    eval_deadline: float
    mutation_annotations: bool
    self_username: str
    enforce_admission_policies: bool
    policy_validation: PolicyValidation
