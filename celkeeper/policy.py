"""PolicySet: an immutable set of compiled templates and their constraints, indexed by kind.

    compiler = TemplateCompiler(engine)          # long-lived per process/worker: caches compiled
                                                 # templates by content hash (unchanged content is
                                                 # never recompiled)
    policies = build_policy_set(documents, compiler)
    policies.templates        -> Mapping[str, CompiledTemplate]   (by template name)
    policies.constraints      -> tuple[Constraint, ...]
    policies.errors           -> tuple[CelkeeperError, ...]  every problem found (file, document, field,
                                 line:col); a broken document is reported here and left out, the
                                 rest is still built
    policies.candidates(group, kind) -> tuple[Candidate, ...]: the (template, constraint, match,
                                 binding) of each constraint whose match.kinds can select objects of
                                 that API group and kind (indexed; constraints of other kinds cost
                                 nothing); `binding` is the constraint bound to its template's
                                 program in the engine (made once, when the set is built)

    policies.expansions       -> Expansions: the ExpansionTemplates among the documents (celkeeper.expansion)
    policies.mutators         -> MutatorSet: Gatekeeper's mutators among the documents, in Gatekeeper's
                                 mutation System (celkeeper.mutation); the refused and the conflicting
                                 ones are in `.errors` too

`documents` is an iterable of celkeeper.documents.Document (templates, constraints, ExpansionTemplates
and mutators, in any order, celkeeper's and Gatekeeper's API groups). Documents that are none of
these are ignored. A template whose expressions do not compile is kept (its errors are reported; its
broken expressions fail at request time as Gatekeeper's do); a structurally invalid template is left out
with its constraints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from celkeeper.cel.api import Binding, Engine
from celkeeper.constraints import Constraint, ParameterValidator, is_constraint, parse_constraint
from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError, ConstraintError, TemplateError
from celkeeper.expansion import ExpansionError, Expansions, read_expansion_templates
from celkeeper.match import Match, parse_match
from celkeeper.mutation.kinds import is_mutator
from celkeeper.templates import CompiledTemplate, TemplateCompiler
from celkeeper.templates.spec import KIND as TEMPLATE_KIND

if TYPE_CHECKING:
    from celkeeper.mutation import MutationOptions, MutatorSet

__all__ = ["Candidate", "PolicySet", "TemplateCompiler", "build_policy_set"]


@dataclass(frozen=True, eq=False)
class Candidate:
    """A constraint with its template, its parsed spec.match and its binding in the engine."""

    template: CompiledTemplate
    constraint: Constraint
    match: Match
    binding: Binding


class PolicySet:
    """Immutable after construction (the per-kind candidate lists are memoised on first use)."""

    def __init__(
        self,
        engine: Engine,
        templates: Mapping[str, CompiledTemplate],
        candidates: Iterable[Candidate],
        errors: Iterable[CelkeeperError] = (),
        expansions: Expansions | None = None,
        *,
        mutators: MutatorSet | None = None,
    ) -> None:
        self._engine = engine
        self._expansions = expansions if expansions is not None else Expansions()
        self._mutators = mutators  # None: none, the empty set made when first asked for
        self._templates = MappingProxyType(dict(templates))
        ordered = sorted(candidates, key=lambda c: (c.constraint.kind, c.constraint.name))
        self._all = tuple(ordered)
        self._errors = tuple(errors)
        self._exact: dict[tuple[str, str], list[Candidate]] = {}
        self._any_group: dict[str, list[Candidate]] = {}
        self._any_kind: dict[str, list[Candidate]] = {}
        self._universal: list[Candidate] = []
        for candidate in self._all:
            for group, kind in candidate.match.index_keys():
                if group is None and kind is None:
                    bucket = self._universal
                elif group is None:
                    bucket = self._any_group.setdefault(str(kind), [])
                elif kind is None:
                    bucket = self._any_kind.setdefault(group, [])
                else:
                    bucket = self._exact.setdefault((group, kind), [])
                if not bucket or bucket[-1] is not candidate:
                    bucket.append(candidate)
        self._memo: dict[tuple[str, str], tuple[Candidate, ...]] = {}
        self._position = {id(c): i for i, c in enumerate(self._all)}

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def expansions(self) -> Expansions:
        return self._expansions

    @property
    def mutators(self) -> MutatorSet:
        if self._mutators is None:
            from celkeeper.mutation import MutatorSet  # the mutation System: only when asked for

            self._mutators = MutatorSet()
        return self._mutators

    @property
    def given_mutators(self) -> MutatorSet | None:
        """The mutators the set was built with; None when none (`mutators` makes the empty set)."""
        return self._mutators

    @property
    def templates(self) -> Mapping[str, CompiledTemplate]:
        return self._templates

    @property
    def constraints(self) -> tuple[Constraint, ...]:
        return tuple(c.constraint for c in self._all)

    @property
    def all_candidates(self) -> tuple[Candidate, ...]:
        return self._all

    @property
    def errors(self) -> tuple[CelkeeperError, ...]:
        return self._errors

    def template_for_kind(self, kind: str) -> CompiledTemplate | None:
        return self._templates.get(kind.lower())

    def candidates(self, group: str, kind: str) -> tuple[Candidate, ...]:
        """The constraints that can select objects of this group and kind, ordered by (kind, name)."""
        key = (group, kind)
        found = self._memo.get(key)
        if found is None:
            found = self._merge(
                self._exact.get(key, ()),
                self._any_group.get(kind, ()),
                self._any_kind.get(group, ()),
                self._universal,
            )
            if len(self._memo) < 10_000:  # bounded: kinds come from requests
                self._memo[key] = found
        return found

    def _merge(self, *buckets: Sequence[Candidate]) -> tuple[Candidate, ...]:
        """The candidates of these buckets, each once, in (kind, name) order."""
        merged = {id(c): c for bucket in buckets for c in bucket}
        return tuple(sorted(merged.values(), key=lambda c: self._position[id(c)]))


def build_policy_set(
    documents: Iterable[Document], compiler: TemplateCompiler, mutation: MutationOptions | None = None
) -> PolicySet:
    """Build a PolicySet from template, constraint, ExpansionTemplate and mutator documents; problems go
    to `.errors`. `mutation`: the options of the mutation webhook the mutators run in."""
    docs = list(documents)
    errors: list[CelkeeperError] = []
    templates: dict[str, CompiledTemplate] = {}
    first_template: dict[str, Document] = {}
    validators: dict[str, ParameterValidator | None] = {}

    for doc in docs:
        if doc.kind != TEMPLATE_KIND or is_constraint(doc):
            continue
        template, problems = compiler.load(doc)
        errors.extend(problems)
        name = template.name if template is not None else doc.name
        if name and name in first_template:
            first = first_template[name].location("metadata.name")
            errors.append(
                doc.error(
                    TemplateError,
                    f"template {name}: defined twice (first at {first}); this one is ignored",
                    "metadata.name",
                )
            )
            continue
        if name:
            first_template[name] = doc
        if template is not None:
            templates[template.name] = template
            validators[template.kind] = template.parameters
        else:
            kind = _declared_kind(doc)
            if kind and kind not in validators:
                validators[kind] = None

    candidates: list[Candidate] = []
    seen: dict[tuple[str, str], Document] = {}
    interned: dict[Match, Match] = {}  # equal matches share one object: decide matches each once
    for doc in docs:
        if not is_constraint(doc):
            continue
        constraint, constraint_problems = parse_constraint(doc, validators)
        errors.extend(constraint_problems)
        if constraint is None:
            continue
        match, match_problems = parse_match(constraint.match, doc)
        if match_problems:
            prefix = f"constraint {constraint.kind}/{constraint.name}: "
            errors.extend(type(e)(prefix + e.message, e.location) for e in match_problems)
            continue
        assert match is not None
        key = (constraint.kind, constraint.name)
        if key in seen:
            errors.append(
                doc.error(
                    ConstraintError,
                    f"constraint {constraint.kind}/{constraint.name}: defined twice (first at "
                    f"{seen[key].location('metadata.name')}); this one is ignored",
                    "metadata.name",
                )
            )
            continue
        seen[key] = doc
        template = templates[constraint.kind.lower()]
        try:
            binding = compiler.bind(template, doc.data)
        except ValueError as err:  # the engine cannot read the constraint object
            errors.append(
                doc.error(ConstraintError, f"constraint {constraint.kind}/{constraint.name}: {err}", "")
            )
            continue
        candidates.append(Candidate(template, constraint, interned.setdefault(match, match), binding))

    expansion_templates, expansion_errors = read_expansion_templates(docs)
    errors.extend(expansion_errors)
    expansions = Expansions(expansion_templates)
    for expansion in expansions.templates:
        closer = expansions.cycles.get(expansion.name)
        if closer is not None and expansion.document is not None:
            others = sorted(n for n, c in expansions.cycles.items() if c == closer and n != expansion.name)
            errors.append(
                expansion.document.error(
                    ExpansionError,
                    f"ExpansionTemplate {expansion.name}: template forms expansion cycle (with "
                    f"{', '.join(others)}); every template of the cycle is ignored",
                    "spec.generatedGVK",
                )
            )
    mutators = _mutators(docs, mutation)
    if mutators is not None:
        errors.extend(mutators.errors)
    errors.sort(key=_error_order)
    return PolicySet(compiler.engine, templates, candidates, errors, expansions, mutators=mutators)


def _mutators(docs: Sequence[Document], options: MutationOptions | None) -> MutatorSet | None:
    """The mutators among `docs`; without the native library, none, each reported. None when there are
    no mutators and no options (PolicySet makes the empty set when asked for: the mutation System is
    not imported for a policy set without mutators)."""
    if options is None and not any(is_mutator(doc) for doc in docs):
        return None
    from celkeeper.mutation import MutationUnavailable, MutatorError, MutatorSet, build_mutator_set

    try:
        return build_mutator_set(docs, options)
    except MutationUnavailable as err:
        return MutatorSet(
            errors=[
                doc.error(MutatorError, f"{doc.kind} {doc.name}: not loaded: {err.message}", "")
                for doc in docs
                if is_mutator(doc)
            ],
            options=options,
        )


def _declared_kind(doc: Document) -> str:
    spec = doc.data.get("spec") if isinstance(doc.data, dict) else None
    crd = spec.get("crd") if isinstance(spec, dict) else None
    crd_spec = crd.get("spec") if isinstance(crd, dict) else None
    names = crd_spec.get("names") if isinstance(crd_spec, dict) else None
    kind = names.get("kind") if isinstance(names, dict) else None
    return kind if isinstance(kind, str) else ""


def _error_order(err: CelkeeperError) -> tuple[str, int, int, int]:
    where = err.location
    return (where.file or "", where.document or 0, where.line or 0, where.column or 0)
