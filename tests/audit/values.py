"""A sample object and violation the tests of the audit's reporting share."""

from __future__ import annotations

from celkeeper.audit.results import ObjectRef, Violation

REF = ObjectRef("apps", "v1", "Deployment", "shop", "web", uid="u-1", resource_version="42")
VIOLATION = Violation(
    ("K8sLabels", "must-have-owner"), "scoped", ("deny", "warn"), "missing owner", REF, {"app": "web"}
)
