"""The offline tools' view of the policy engine: build policy sets, review objects as gator does.

Everything the CLI tools need from celkeeper.policy / celkeeper.review / celkeeper.cel goes through
here, at the CLI enforcement point (gator.gatekeeper.sh). One PolicyBackend keeps one template
compiler, so a template shared by many tests or suites is compiled once.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from celkeeper.cel import Engine, get_engine
from celkeeper.cel.inventory import object_row
from celkeeper.documents import Document
from celkeeper.errors import (
    CelkeeperError,
    ConstraintError,
    ConstraintSchemaError,
    ReviewError,
    TemplateError,
    is_warning,
)
from celkeeper.expansion import ExpansionError
from celkeeper.gator.kinds import is_constraint_document, is_namespace, is_template_document
from celkeeper.gator.reviews import is_admission_review, review_request
from celkeeper.gator.violation import Violation
from celkeeper.model import Action, Decision, EnforcementPoint, JsonValue
from celkeeper.policy import PolicySet, build_policy_set
from celkeeper.review import (
    AdmissionRequest,
    NamespaceLookup,
    SyncedData,
    decide,
    request_for_object,
)
from celkeeper.review.decide import BASE_MUTATION, ExpansionNamespace, Tracer
from celkeeper.settings import EngineName
from celkeeper.templates import TemplateCompiler, TemplateSpec, Verdicts

#: seconds a review may spend in the engine: none, as gator has none (the webhook's deadline is for
#: the API server's timeout; each evaluation is still bounded by the engine's runtime cost budget)
OFFLINE_DEADLINE = 0.0


@dataclass(frozen=True)
class Loaded:
    policies: PolicySet
    errors: tuple[CelkeeperError, ...]


class PolicyBackend:
    def __init__(
        self,
        engine: EngineName,
        point: EnforcementPoint = EnforcementPoint.CLI,
        *,
        loaded: Engine | None = None,
        verdicts: Verdicts | None = None,
    ) -> None:
        """`loaded`: the engine named `engine`, when the caller has built it already; `verdicts`:
        known results of jsonschema's checks (e.g. gator.verdicts.DiskVerdicts)."""
        self.engine_name = engine
        self.point = point
        self.compiler = TemplateCompiler(
            loaded if loaded is not None else get_engine(engine), verdicts=verdicts
        )
        self.warnings: list[CelkeeperError] = []  # what loading found that Gatekeeper accepts

    # -- loading ----------------------------------------------------------------------------------
    def build(self, documents: Sequence[Document]) -> Loaded:
        policies = build_policy_set(documents, self.compiler)
        return Loaded(policies=policies, errors=tuple(policies.errors))

    def load(
        self, template: Document, constraint: Document, expansions: Sequence[Document] = ()
    ) -> tuple[PolicySet, Sequence[CelkeeperError]]:
        """The policy set of a Suite's test (its template, its constraint and the ExpansionTemplates of
        its `expansion:` file), and the problems that stop the test as they stop gator's (warnings,
        such as expressions that do not compile, do not: see `warnings`)."""
        errors: list[CelkeeperError] = []
        if not is_template_document(template):
            errors.append(template.error(TemplateError, f"not a ConstraintTemplate ({_gvk(template)})", ""))
        if not is_constraint_document(constraint):
            errors.append(constraint.error(ConstraintError, f"not a Constraint ({_gvk(constraint)})", ""))
        loaded = self.build([template, constraint, *expansions])
        errors.extend(e for e in loaded.errors if not is_warning(e))
        self.warnings.extend(e for e in loaded.errors if is_warning(e))
        if not errors and not loaded.policies.constraints:
            errors.append(constraint.error(ConstraintError, "the constraint was not loaded", ""))
        return loaded.policies, errors

    def compile_ahead(self, templates: Iterable[Document], threads: int = 1) -> list[threading.Thread]:
        """Start compiling these templates' CEL on `threads` threads of their own, in their order, while
        the caller goes on (reading files, checking parameters, reviewing with the templates compiled so
        far): the cel-go engine compiles without holding the GIL (on as many compilers as the engine was
        given `compile_threads`). Each template is handed to the threads as soon as it is read (the
        iterable may read the files: the first compiles while the others are read), the k-th thread
        started with the k-th template. `load` then finds each compiled, or waits for the compilation
        under way (TemplateCompiler.prepare); what compiling found is reported by `load`, as without
        this. Templates with structural errors are left to `load`. Returns the threads (started)."""
        specs: queue.SimpleQueue[TemplateSpec | None] = queue.SimpleQueue()
        started: list[threading.Thread] = []
        for document in templates:
            spec = self.compiler.parse(document) if is_template_document(document) else None
            if spec is None:
                continue
            specs.put(spec)
            if len(started) < threads:
                thread = threading.Thread(
                    target=self._compile, args=(specs,), name="celkeeper-compile", daemon=True
                )
                thread.start()
                started.append(thread)
        for _ in started:
            specs.put(None)  # each thread ends at one of these, once the templates before it are taken
        return started

    def _compile(self, specs: queue.SimpleQueue[TemplateSpec | None]) -> None:
        while (spec := specs.get()) is not None:
            with contextlib.suppress(Exception):  # `load` compiles it again and reports what it raises
                self.compiler.prepare(spec)

    @staticmethod
    def is_expected_invalid(errors: Sequence[CelkeeperError]) -> bool:
        """Only a constraint that breaks its CRD's schema is what `invalid: true` expects (gator:
        errors.Is(err, constraints.ErrSchema)); any other rejection fails such a test."""
        return bool(errors) and all(isinstance(e, ConstraintSchemaError) for e in errors)

    # -- reviewing --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def inventory(self, policies: PolicySet, objects: Iterable[Document]) -> Iterator[SyncedData | None]:
        """The synced data of an offline review: `objects` (gator's `inventory:`, or every object
        `test` is given), for the templates that read synced data (None when none does): a store of
        its own, written and opened for the review, then removed."""
        if not any(t.reads_data for t in policies.templates.values()):
            yield None
            return
        import tempfile

        from celkeeper.snapshot.datastore import write_inventory  # only such a review needs a store

        data = [
            d.data
            for d in objects
            if isinstance(d.data, Mapping) and not is_admission_review(d) and object_row(d.data)
        ]
        with tempfile.TemporaryDirectory(prefix="celkeeper-inventory-") as directory:
            path = write_inventory(Path(directory) / "inventory.db", data)
            opened = self.compiler.engine.open_inventory(str(path))
            try:
                yield SyncedData(inventory=opened, synced=None)  # an inventory is complete
            finally:
                opened.close()

    def decide(
        self,
        policies: PolicySet,
        document: Document,
        namespaces: NamespaceLookup,
        data: SyncedData | None = None,
        *,
        tracer: Tracer | None = None,
        expansion_namespace: ExpansionNamespace | None = None,
        mutate_before_expanding: bool = False,
    ) -> Decision:
        """The decision on one document: a plain object, or an AdmissionReview (its request is used).

        A plain object is expanded (policies.expansions) and what it generates is reviewed too, put in
        the namespace `expansion_namespace` names (see review.decide); an AdmissionReview is not (gator
        expands only plain objects). `data`: the synced data templates read; `tracer`,
        `mutate_before_expanding`: see review.decide. No wall-clock deadline, as gator has none."""
        request, expand = self.request(document)
        try:
            return decide(
                request,
                policies,
                namespaces,
                self.point,
                data=data,
                deadline=OFFLINE_DEADLINE,
                expand=expand,
                expansion_namespace=expansion_namespace,
                mutate_before_expanding=mutate_before_expanding,
                tracer=tracer,
            )
        except ExpansionError as err:  # as gator words it (verify's and the expander's prefixes)
            meta = document.data.get("metadata") if isinstance(document.data, Mapping) else None
            name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
            if err.message.startswith(BASE_MUTATION):  # the expander's own words
                raise ExpansionError(f"expanding resource {name}: {err.message}") from None
            raise ExpansionError(
                f"expanding resource {name}: error expanding resource {name}: {err.message}"
            ) from None

    def request(self, document: Document) -> tuple[AdmissionRequest, bool]:
        """The request reviewing a document, and whether it is expanded."""
        try:
            if not is_admission_review(document):
                request = request_for_object(document.data)
            else:
                request = review_request(document)
        except ReviewError as err:
            raise err.at(file=document.file, document=document.index) from err.__cause__
        return request, not is_admission_review(document)

    def review(self, policies: PolicySet, obj: Document, inventory: Sequence[Document]) -> list[Violation]:
        """gator verify's review of one case: the object (or AdmissionReview) with the inventory's
        Namespaces known to matching and the inventory as synced data, and every object the test's
        ExpansionTemplates generate from a plain object (in the namespace gator verify knows for it)."""
        namespaces = {d.name: d.data for d in inventory if is_namespace(d) and d.name}
        with self.inventory(policies, inventory) as data:
            decision = self.decide(policies, obj, namespaces.get, data, expansion_namespace=verify_namespace)
        return self.violations(policies, decision)

    def violations(self, policies: PolicySet, decision: Decision) -> list[Violation]:
        """The decision's results as Gatekeeper reports them: one per violation, with the
        constraint's enforcement action; a `scoped` constraint's violation once, with the actions
        that apply at this point (decide gives one Result per action)."""
        constraints = {(c.kind, c.name): c for c in policies.constraints}
        out: list[Violation] = []
        pending: dict[tuple[str, str, str], int] = {}  # scoped results not yet folded into one
        for result in decision.results:
            key = (result.constraint_kind, result.constraint_name)
            constraint = constraints.get(key)
            if result.expansion_action and result.expansion_action != Action.SCOPED.value:
                # a generated object's result under its ExpansionTemplate's action: the constraint's
                # scoped actions stay (expansion.OverrideEnforcementAction changes only the action)
                scoped = (
                    tuple(str(a) for a in constraint.actions_for(self.point.value))
                    if constraint is not None and constraint.enforcement_action is Action.SCOPED
                    else ()
                )
                out.append(Violation(result.message, result.expansion_action, scoped, key))
                continue
            if constraint is None or constraint.enforcement_action is not Action.SCOPED:
                out.append(Violation(result.message, str(result.action), constraint=key))
                continue
            actions = constraint.actions_for(self.point.value)
            fold = (*key, result.message)
            seen = pending.get(fold, 0) + 1
            if seen == len(actions):
                out.append(Violation(result.message, "scoped", tuple(str(a) for a in actions), key))
                seen = 0
            pending[fold] = seen
        return out


def _gvk(document: Document) -> str:
    return f"{document.api_version or '<no apiVersion>'}, kind {document.kind or '<none>'}"


def verify_namespace(obj: Mapping[str, JsonValue]) -> str | None:
    """The namespace gator verify's expander knows for an object (it has no Namespaces): "" for a
    cluster-scoped object, `default`, or None (the generated object keeps the parent's)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    namespace = meta.get("namespace") or ""
    if namespace == "":
        return ""
    return "default" if namespace == "default" else None
