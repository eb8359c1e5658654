"""From snapshot items to the policy documents in them (templates, constraints, ExpansionTemplates), with a
cache.

A policy folder also holds other things (gator suites, sample objects): documents of other kinds
are left out silently. Text that does not parse is reported (it may have been a policy).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from celkeeper.documents import Document, ParsedText, parse_documents
from celkeeper.errors import DocumentError, Location
from celkeeper.expansion import is_expansion_template
from celkeeper.mutation import is_mutator
from celkeeper.snapshot.contents import ORIGIN_OBJECT, SnapshotItem

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
