"""Kubernetes' admission policies in the offline `celkeeper audit`: the policies among the files, with the
parameter objects and Namespaces among the inputs, built into the audit layer's AdmissionAudit
(celkeeper.audit.admissionpolicies: how each object is answered and what becomes a row), its problems
reported on the tool's inputs (errors located, notes)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from celkeeper.audit.admissionpolicies import AdmissionAudit
from celkeeper.cli.admissionpolicies import AdmissionReviewer
from celkeeper.documents import Document
from celkeeper.model import JsonValue


def build(
    inputs: Any, documents: Sequence[Document], objects: Iterable[Mapping[str, JsonValue]]
) -> AdmissionAudit | None:
    """The admission policies among `documents` with the parameter objects and Namespaces among `objects`;
    their problems reported on `inputs`; None when there are none."""
    reviewer = AdmissionReviewer.build(documents, objects)
    if reviewer is None:
        return None
    return AdmissionAudit.of(inputs, reviewer.policies, documents)
