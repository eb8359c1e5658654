"""Which documents are templates, constraints, ExpansionTemplates, mutators, suites or AdmissionReviews (by
API group and kind)."""

from __future__ import annotations

from celkeeper.documents import Document
from celkeeper.expansion import is_expansion_template
from celkeeper.mutation.kinds import is_mutator

TEMPLATE_GROUPS = frozenset({"templates.gatekeeper.sh", "templates.celkeeper.io"})
CONSTRAINT_GROUPS = frozenset({"constraints.gatekeeper.sh", "constraints.celkeeper.io"})


def is_template_document(document: Document) -> bool:
    return document.group in TEMPLATE_GROUPS and document.kind == "ConstraintTemplate"


def is_constraint_document(document: Document) -> bool:
    return document.group in CONSTRAINT_GROUPS


def is_policy_document(document: Document) -> bool:
    """A template, a constraint, an ExpansionTemplate or a mutator: what a policy set is built from."""
    return (
        is_template_document(document)
        or is_constraint_document(document)
        or is_expansion_template(document)
        or is_mutator(document)
    )


def is_namespace(document: Document) -> bool:
    return document.api_version == "v1" and document.kind == "Namespace"
