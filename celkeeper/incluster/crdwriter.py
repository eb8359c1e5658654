"""CRDs that create CRDs: every ConstraintTemplate gets its constraint CRD, and loses it with the template.

Leaderless: every pod runs this and any may write. Writes are idempotent: the desired CRD
(celkeeper.crds.constraint_crd, with a digest annotation) is compared with the stored one, ignoring what
the API server adds, and written only when they differ. Two pods racing settle it through the API: a
create that finds the name taken, or an update with a stale resourceVersion, re-reads the CRD and
finds nothing left to do (or retries on the fresh copy).

A constraint CRD (labelled celkeeper.io/constraint=yes) whose template is gone is deleted - the test
control plane runs no garbage collector, so the ownerReference alone would not do it. Before deleting,
the template is read from the API: a pod whose template watch lags behind its CRD watch must not
delete the CRD of a template it has not seen yet. A template that can no longer define a valid CRD
keeps the CRD it has (deleting it would delete every constraint of the kind over a typo).

Least privilege where RBAC cannot help (`create` cannot be limited to names; the constraint CRDs'
names are not known in advance): the writer creates only CRDs of the group constraints.celkeeper.io,
updates and deletes only CRDs of that group labelled celkeeper.io/constraint=yes, and leaves any other
CRD of the same name alone (reported: a template whose kind collides with a CRD someone else made).
docs/security.md gives the ValidatingAdmissionPolicy that enforces the same rule in the API server.

celkeeper's controller (celkeeper.incluster): writes through celkeeper.kube.writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from celkeeper.crds import constraint_crd, names
from celkeeper.errors import TemplateError
from celkeeper.incluster.resources import CONSTRAINT_CRDS, TEMPLATES, constraints, template_constraint_kind
from celkeeper.kube.client import ApiError, Client
from celkeeper.kube.compare import for_update, up_to_date, with_digest
from celkeeper.kube.manager import Event, WatchManager
from celkeeper.kube.resources import ALL_CRDS, labels_of, name_of, uid_of
from celkeeper.kube.writes import NotOurs, delete_if_present, write_desired

log = logging.getLogger("celkeeper.incluster")

REGISTRAR = "constraint-crds"


def desired_crd(template: Mapping[str, Any]) -> dict[str, Any] | None:
    """The constraint CRD a template wants (digest annotated), None when it cannot define one."""
    if template_constraint_kind(template) is None:
        return None
    try:
        return with_digest(constraint_crd(dict(template)))
    except TemplateError:
        return None


@dataclass
class CrdPlan:
    writes: list[tuple[dict[str, Any], Mapping[str, Any] | None]] = field(default_factory=list)
    deletes: list[Mapping[str, Any]] = field(default_factory=list)  # stored CRDs whose template is gone


def plan(templates: Iterable[Mapping[str, Any]], stored_crds: Iterable[Mapping[str, Any]]) -> CrdPlan:
    """What to write and delete so that the stored constraint CRDs match the templates (pure)."""
    stored = {name_of(crd): crd for crd in stored_crds}
    template_names = set()
    result = CrdPlan()
    for template in templates:
        template_names.add(name_of(template))
        desired = desired_crd(template)
        if desired is None:
            continue
        current = stored.get(desired["metadata"]["name"])
        if not up_to_date(current, desired):
            result.writes.append((desired, current))
    for _name, crd in sorted(stored.items()):
        owner = labels_of(crd).get(names.TEMPLATE_LABEL)
        if owner and owner not in template_names and ours(crd):
            result.deletes.append(crd)
    return result


def ours(crd: Mapping[str, Any]) -> bool:
    """A constraint CRD celkeeper made: in its group, with its label."""
    spec = crd.get("spec") or {}
    labelled = labels_of(crd).get(names.CONSTRAINT_CRD_LABEL) == "yes"
    return spec.get("group") == names.CONSTRAINTS_GROUP and labelled


def established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


class ConstraintCrdWriter:
    """Keeps constraint CRDs in line with templates; `reconcile()` is called by the controller loop."""

    def __init__(
        self, client: Client, manager: WatchManager, on_change: Callable[[], None] | None = None
    ) -> None:
        self.client = client
        self.manager = manager
        self.on_change = on_change
        self.dirty = True
        self.writes = 0  # API writes made (creates, updates, deletes), for logs and tests

    def register(self) -> None:
        self.manager.register(REGISTRAR, self.handle, {TEMPLATES, CONSTRAINT_CRDS})

    def handle(self, event: Event) -> None:
        self.dirty = True
        if event.resource == CONSTRAINT_CRDS and event.type != "DELETED" and established(event.object):
            kind = ((event.object.get("spec") or {}).get("names") or {}).get("kind")
            if isinstance(kind, str):
                self.manager.kick(constraints(kind))  # its constraints can be listed now
        if self.on_change is not None:
            self.on_change()

    def ready(self) -> bool:
        return self.manager.synced(TEMPLATES) and self.manager.synced(CONSTRAINT_CRDS)

    def reconcile(self) -> None:
        if not self.ready():
            return
        todo = plan(self.manager.objects(TEMPLATES), self.manager.objects(CONSTRAINT_CRDS))
        failed: list[str] = []
        for desired, stored in todo.writes:
            try:
                self._write(desired, stored)
            except ApiError as err:
                failed.append(f"cannot write CRD {desired['metadata']['name']}: {err}")
        for crd in todo.deletes:
            try:
                self._delete(crd)
            except ApiError as err:
                failed.append(f"cannot delete CRD {name_of(crd)}: {err}")
        if failed:
            raise ApiError(0, "Partial", "; ".join(failed))

    def _write(self, desired: dict[str, Any], stored: Mapping[str, Any] | None) -> None:
        if not ours(desired):  # never: constraint_crd makes them so; the guard makes it a rule
            name = desired["metadata"]["name"]
            raise NotOurs(400, "BadRequest", f"refusing to write CRD {name}: not celkeeper's")
        outcome = write_desired(
            self.client, ALL_CRDS, desired, stored, current=up_to_date, update_body=for_update, owned=ours
        )
        if outcome is not None:
            self.writes += 1
            log.info("%s constraint CRD %s", outcome, desired["metadata"]["name"])

    def _delete(self, crd: Mapping[str, Any]) -> None:
        name = name_of(crd)
        template = labels_of(crd).get(names.TEMPLATE_LABEL, "")
        try:
            self.client.get(TEMPLATES, template)
            return  # the template exists: this pod's watch has not caught up yet
        except ApiError as err:
            if not err.not_found:
                raise
        if not ours(crd):
            return
        if delete_if_present(self.client, ALL_CRDS, name, uid_of(crd)):
            self.writes += 1
            log.info("deleted constraint CRD %s: its template %s is gone", name, template)
