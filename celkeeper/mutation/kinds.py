"""Which documents are Gatekeeper's mutators (by API group and kind): what the tools that read policies
ask of every document, without the mutation System (mutators.py) and the native library it loads."""

from __future__ import annotations

from celkeeper.documents import Document

GROUP = "mutations.gatekeeper.sh"
KINDS = frozenset({"Assign", "AssignMetadata", "ModifySet", "AssignImage"})


def is_mutator(document: Document) -> bool:
    return document.group == GROUP and document.kind in KINDS
