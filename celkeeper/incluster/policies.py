"""The cluster's policies as a watch manager keeps them: templates, the constraints of every template's
kind, Gatekeeper's ExpansionTemplates and mutators (when their CRDs are installed) and namespaces. Used by
the webhook pods' informer and by the audit.

    watch = PolicyWatch(manager, on_change=wake)
    watch.register()                  # before or after manager.start()
    view = watch.view()               # a consistent copy of the lists, and whether they are complete

A template that appears or goes starts or stops the watch of its constraint kind (no restart). The view
is `synced` once the templates, the namespaces and every constraint kind of the templates known at that
moment have been listed. `on_change` is called (on a watch thread, under the manager's lock: it must be
quick) after every event.

celkeeper's (celkeeper.incluster): a registrar of the adapter's WatchManager.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from celkeeper.incluster.resources import (
    EXPANSION_TEMPLATES,
    MUTATORS,
    TEMPLATES,
    ConstraintKinds,
    is_constraint_resource,
)
from celkeeper.kube.manager import Event, WatchManager
from celkeeper.kube.resources import NAMESPACES, Resource, name_of

REGISTRAR = "policies"
#: what is always watched (constraint kinds come and go with their templates)
BASE = frozenset({TEMPLATES, NAMESPACES, EXPANSION_TEMPLATES, *MUTATORS})


@dataclass(frozen=True)
class PolicyView:
    objects: tuple[Mapping[str, Any], ...]  # templates, constraints by kind, ExpansionTemplates, mutators
    # (shared: do not change)
    namespaces: Mapping[str, Mapping[str, Any]]  # name -> the Namespace object as watched
    synced: bool  # templates, namespaces and the constraints of every known template kind listed
    namespaces_synced: bool
    templates_missing: bool  # the ConstraintTemplate CRD is not installed


class PolicyWatch:
    def __init__(
        self, manager: WatchManager, on_change: Callable[[], None] | None = None, name: str = REGISTRAR
    ) -> None:
        self.manager = manager
        self.on_change = on_change
        self.name = name
        self._kinds = ConstraintKinds()

    def register(self) -> None:
        self.manager.register(self.name, self._handle, set(BASE))

    def _handle(self, event: Event) -> None:
        if event.resource == TEMPLATES and self._kinds.update(
            event.type, event.object, lambda: self.manager.objects(TEMPLATES)
        ):
            self.manager.set_intent(self.name, set(BASE) | self._kinds.resources())
        if self.on_change is not None:
            self.on_change()

    def constraint_resources(self) -> list[Resource]:
        """The constraint kinds watched now, in a stable order."""
        return sorted((r for r in self.manager.intent(self.name) if is_constraint_resource(r)), key=str)

    def view(self) -> PolicyView:
        with self.manager.lock:
            wanted = self.manager.intent(self.name)
            synced = bool(wanted) and all(self.manager.synced(r) for r in wanted)
            objects: list[Mapping[str, Any]] = list(self.manager.objects(TEMPLATES))
            for resource in self.constraint_resources():
                objects.extend(self.manager.objects(resource))
            objects.extend(self.manager.objects(EXPANSION_TEMPLATES))
            for resource in MUTATORS:
                objects.extend(self.manager.objects(resource))
            namespaces = {name_of(ns): ns for ns in self.manager.objects(NAMESPACES)}
            return PolicyView(
                objects=tuple(objects),
                namespaces=namespaces,
                synced=synced,
                namespaces_synced=self.manager.synced(NAMESPACES),
                templates_missing=self.manager.missing(TEMPLATES),
            )
