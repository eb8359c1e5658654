"""Settings: one immutable value built at the edge (CLI flags, environment) and passed down.

The core never reads the environment itself: the CLI builds Settings from flags and environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

ENGINES = ("cel-go", "cel-python")
DEFAULT_ENGINE = "cel-go"  # Kubernetes' own CEL, as Gatekeeper runs it (a Go library built by setup.py)
FALLBACK_ENGINE = "cel-python"  # pure Python: what runs when the cel-go library is not built
POLICY_VALIDATION = ("deny", "warn")


@dataclass(frozen=True)
class CelLimits:
    """Bounds on CEL sources, checked by the cel-python engine's front end before anything is
    evaluated (the cel-go engine has Kubernetes' own; both bound evaluations by a runtime cost budget).
    The defaults refuse nothing Gatekeeper accepts: cel-go's parser limits an expression to 100,000
    code points and has no smaller limit on its parts (literals, regular expressions)."""

    max_expression_length: int = 100_000  # characters in one expression (cel-go's parser's limit)
    max_ast_depth: int = 100  # nesting of the parsed expression
    max_comprehension_depth: int = 32  # comprehensions nested inside comprehensions (all/exists/map/...)
    max_literal_length: int = 100_000  # characters/bytes in one string or bytes literal
    max_aggregate_literal_size: int = 100_000  # elements in one list or map literal
    max_regex_length: int = 100_000  # characters of a literal regular expression


@dataclass(frozen=True)
class Settings:
    engine: str = DEFAULT_ENGINE
    limits: CelLimits = field(default_factory=CelLimits)
    # namespaces never checked (`prefix*` patterns allowed); they may also carry the ignore label
    exempt_namespaces: frozenset[str] = frozenset()
    # namespaces where the ignore label is honoured (allowed to carry it: /v1/admitlabel refuses it
    # elsewhere); on any other namespace the label is ignored
    ignore_label_namespaces: frozenset[str] = frozenset()
    ignore_label: str = "admission.celkeeper.io/ignore"
    # whether deleting an exempt or ignore-labelled Namespace object is exempt too (default: checked)
    exempt_namespace_deletes: bool = False
    # what the webhook answers when it fails internally: "allow" (fail open, Gatekeeper's default) or "deny"
    failure_mode: str = "allow"
    max_request_bytes: int = 3 * 1024 * 1024 + 64 * 1024
    # seconds the policies may take to decide one admission request: below the webhook's registered
    # timeoutSeconds (3 s in deploy/, 10 s by default), which also covers reading and writing it
    eval_deadline: float = 2.0
    # celkeeper's own templates and constraints at apply time (POST /v1/admitpolicy): "deny" refuses
    # broken ones, "warn" lets them in with admission warnings (Gatekeeper's leniency)
    policy_validation: str = "deny"

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"unknown CEL engine {self.engine!r}; choose one of {', '.join(ENGINES)}")
        if self.failure_mode not in ("allow", "deny"):
            raise ValueError(f"failure mode must be 'allow' or 'deny', not {self.failure_mode!r}")
        if self.eval_deadline < 0:
            raise ValueError(f"the evaluation deadline cannot be negative ({self.eval_deadline})")
        if self.policy_validation not in POLICY_VALIDATION:
            raise ValueError(f"policy validation must be 'deny' or 'warn', not {self.policy_validation!r}")

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]
