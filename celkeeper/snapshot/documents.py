"""From snapshot items to the policy documents in them (templates, constraints, ExpansionTemplates), with a
cache.

A policy folder also holds other things (gator suites, sample objects): documents of other kinds
are left out silently. Text that does not parse is reported (it may have been a policy).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from celkeeper.admissionpolicy import (
    AdmissionPolicies,
    Selected,
    is_admission_policy_document,
    is_crd_document,
    is_param,
    param_kinds,
    select,
)
from celkeeper.documents import Document, ParsedText, parse_documents
from celkeeper.errors import DocumentError, Location
from celkeeper.expansion import is_expansion_template
from celkeeper.mutation import is_mutator
from celkeeper.snapshot.contents import ORIGIN_OBJECT, Snapshot, SnapshotItem

TEMPLATE_GROUPS = frozenset({"templates.gatekeeper.sh", "templates.celkeeper.io"})
CONSTRAINT_GROUPS = frozenset({"constraints.gatekeeper.sh", "constraints.celkeeper.io"})


def _parse_object(item: SnapshotItem) -> ParsedText:
    """An API object: JSON without positions (errors name the object and the field path)."""
    try:
        data = json.loads(item.text)
    except ValueError as err:
        return ParsedText((), (DocumentError(f"not a JSON object: {err}", Location(file=item.name)),))
    if not isinstance(data, dict):
        return ParsedText((), (DocumentError("not a JSON object", Location(file=item.name)),))
    return ParsedText((Document.from_object(data, file=item.name),), ())


def is_policy_document(doc: Document) -> bool:
    if is_expansion_template(doc) or is_mutator(doc):
        return True
    group = doc.group
    if group in TEMPLATE_GROUPS:
        return doc.kind == "ConstraintTemplate"
    return group in CONSTRAINT_GROUPS


@dataclass(frozen=True)
class PolicyDocuments:
    documents: tuple[Document, ...]  # templates, constraints, ExpansionTemplates and mutators, in item order
    errors: tuple[DocumentError, ...]  # text that could not be parsed


class DocumentCache:
    """Parses items, keeping the result per (name, digest): an unchanged item is not parsed again.

    Not thread-safe: one owner (the worker's loader, the informer) uses it at a time.
    """

    def __init__(self) -> None:
        self._parsed: dict[tuple[str, str], ParsedText] = {}
        self.parses = 0  # how many texts were actually parsed (for tests and logs)

    def parse(self, item: SnapshotItem) -> ParsedText:
        key = (item.name, item.digest)
        parsed = self._parsed.get(key)
        if parsed is None:
            parsed = self._parsed[key] = (
                _parse_object(item)
                if item.origin == ORIGIN_OBJECT
                else (parse_documents(item.text, item.name))
            )
            self.parses += 1
        return parsed

    def relevant(self, item: SnapshotItem) -> bool:
        """Whether the item holds a policy document, or text that does not parse (it may have)."""
        parsed = self.parse(item)
        return bool(parsed.errors) or any(is_policy_document(d) for d in parsed.documents)

    def relevant_items(
        self, items: Iterable[SnapshotItem], *, admission: bool = False
    ) -> tuple[SnapshotItem, ...]:
        """The items that hold a policy document or text that does not parse; with `admission`, also
        those that hold Kubernetes' admission policies, their bindings, CRDs and the objects of the kinds
        the policies take as parameters (the webhook enforces them: --enforce-admission-policies)."""
        if not admission:
            return tuple(i for i in items if self.relevant(i))
        parsed = [(item, self.parse(item)) for item in items]
        kinds = param_kinds(d for _, p in parsed for d in p.documents if is_admission_policy_document(d))

        def wanted(d: Document) -> bool:
            return (
                is_policy_document(d)
                or is_admission_policy_document(d)
                or is_crd_document(d)
                or (bool(kinds) and isinstance(d.data, dict) and is_param(d.data, kinds))
            )

        return tuple(i for i, p in parsed if p.errors or any(wanted(d) for d in p.documents))

    def admission_documents(self, items: Iterable[SnapshotItem]) -> Selected:
        """Kubernetes' admission policies, their bindings, parameter objects and CRDs among the items."""
        return select(d for item in items for d in self.parse(item).documents)

    def admission_policies(self, snapshot: Snapshot) -> AdmissionPolicies | None:
        """The admission policies of a snapshot, built by Kubernetes' code with their parameter objects,
        CRDs and the snapshot's Namespaces (None when it has none). Raises AdmissionPolicyError when the
        native library cannot build them."""
        selected = self.admission_documents(snapshot.items)
        if not selected.policies:
            return None
        namespaces = [Document.from_object(dict(ns)) for ns in snapshot.namespaces.values()]
        return AdmissionPolicies.build(
            selected.policies, params=selected.params, namespaces=namespaces, crds=selected.crds
        )

    def retain(self, items: Iterable[SnapshotItem]) -> None:
        """Forget the parses of items other than these."""
        keep = {(i.name, i.digest) for i in items}
        self._parsed = {k: v for k, v in self._parsed.items() if k in keep}

    def policy_documents(self, items: Iterable[SnapshotItem]) -> PolicyDocuments:
        items = tuple(items)
        documents: list[Document] = []
        errors: list[DocumentError] = []
        for item in items:
            parsed = self.parse(item)
            documents.extend(d for d in parsed.documents if is_policy_document(d))
            errors.extend(parsed.errors)
        self.retain(items)
        return PolicyDocuments(tuple(documents), tuple(errors))
