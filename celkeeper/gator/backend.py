"""The offline tools' view of the policy engine: build policy sets, review objects as gator does.

Everything the CLI tools need from celkeeper.policy / celkeeper.review / celkeeper.cel goes through
here, at the CLI enforcement point (gator.gatekeeper.sh). One PolicyBackend keeps one template
compiler, so a template shared by many tests or suites is compiled once.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celkeeper.cel import get_engine
from celkeeper.cel.inventory import object_row
from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError, ConstraintError, ReviewError, TemplateError
from celkeeper.expansion import ExpansionError
from celkeeper.gator.admission import as_v1_review, checked_request, is_admission_review
from celkeeper.gator.kinds import is_constraint_document, is_namespace, is_template_document
from celkeeper.model import Decision, EnforcementPoint
from celkeeper.policy import PolicySet, build_policy_set
from celkeeper.review import (
    AdmissionRequest,
    SyncedData,
    decide,
    parse_admission_review,
    request_for_object,
)
from celkeeper.review.decide import Tracer
from celkeeper.snapshot.datastore import write_inventory
from celkeeper.templates import TemplateCompiler


@dataclass(frozen=True)
class Loaded:
    policies: PolicySet
    errors: tuple[CelkeeperError, ...]


class PolicyBackend:
    def __init__(self, engine: str, point: EnforcementPoint = EnforcementPoint.CLI) -> None:
        self.engine_name = engine
        self.point = point
        self.compiler = TemplateCompiler(get_engine(engine))

    # -- loading ----------------------------------------------------------------------------------
    def build(self, documents: Sequence[Document]) -> Loaded:
        policies = build_policy_set(documents, self.compiler)
        return Loaded(policies=policies, errors=tuple(policies.errors))

    def load(
        self, template: Document, constraint: Document, expansions: Sequence[Document] = ()
    ) -> tuple[PolicySet, Sequence[CelkeeperError]]:
        errors: list[CelkeeperError] = []
        if not is_template_document(template):
            errors.append(template.error(TemplateError, f"not a ConstraintTemplate ({_gvk(template)})", ""))
        if not is_constraint_document(constraint):
            errors.append(constraint.error(ConstraintError, f"not a Constraint ({_gvk(constraint)})", ""))
        loaded = self.build([template, constraint, *expansions])
        errors.extend(loaded.errors)
        if not errors and not loaded.policies.constraints:
            errors.append(constraint.error(ConstraintError, "the constraint was not loaded", ""))
        return loaded.policies, errors

    @staticmethod
    def is_expected_invalid(errors: Sequence[CelkeeperError]) -> bool:
        return bool(errors) and all(isinstance(e, ConstraintError | TemplateError) for e in errors)

    # -- reviewing --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def inventory(self, policies: PolicySet, objects: Iterable[Document]) -> Iterator[SyncedData | None]:
        """The synced data of an offline review: `objects` (gator's `inventory:`, or every object
        `test` is given), for the templates that read synced data (None when none does): a store of
        its own, written and opened for the review, then removed."""
        if not any(t.reads_data for t in policies.templates.values()):
            yield None
            return
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
        namespaces: Mapping[str, Mapping[str, Any]],
        data: SyncedData | None = None,
        tracer: Tracer | None = None,
    ) -> Decision:
        """The decision on one document: a plain object, or an AdmissionReview (its request is used).

        A plain object is expanded (policies.expansions) and what it generates is reviewed too; an
        AdmissionReview is not (gator expands only plain objects). `data`: the synced data templates read;
        `tracer`: see review.decide."""
        request, expand = self.request(document)
        try:
            return decide(
                request, policies, namespaces.get, self.point, data=data, expand=expand, tracer=tracer
            )
        except ExpansionError as err:  # as gator words it (verify's and the expander's prefixes)
            name = str((document.data.get("metadata") or {}).get("name") or "")
            raise ExpansionError(
                f"expanding resource {name}: error expanding resource {name}: {err.message}"
            ) from None

    def request(self, document: Document) -> tuple[AdmissionRequest, bool]:
        """The request reviewing a document, and whether it is expanded."""
        try:
            if not is_admission_review(document):
                request = request_for_object(document.data)
            else:
                body = checked_request(document)
                if body.get("operation"):
                    request = parse_admission_review(as_v1_review(body))
                else:  # gator accepts a request without an operation: review its object as such
                    new, old = body.get("object"), body.get("oldObject")
                    target = new if new is not None else old
                    assert isinstance(target, Mapping)  # checked_request requires one of them
                    request = request_for_object(
                        target,
                        old_object=old if new is not None else None,
                        user_info=body.get("userInfo"),
                    )
        except ReviewError as err:
            raise err.at(file=document.file, document=document.index) from None
        return request, not is_admission_review(document)

    def review(self, policies: PolicySet, obj: Document, inventory: Sequence[Document]) -> list[str]:
        namespaces = {d.name: d.data for d in inventory if is_namespace(d)}
        with self.inventory(policies, inventory) as data:
            return [r.message for r in self.decide(policies, obj, namespaces, data).results]


def _gvk(document: Document) -> str:
    return f"{document.api_version or '<no apiVersion>'}, kind {document.kind or '<none>'}"
