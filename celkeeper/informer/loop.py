"""The informer: one process per server that lists a Source and publishes snapshots.

    informer = Informer(source, state, settings)
    informer.run(stop)          # until `stop` is set: list, publish when different, wait

Generations grow by one per publication of different content and continue across informer
restarts (the last published snapshot is read back). After publishing, the informer builds the
policy set itself once to report every problem (parse errors, template and constraint errors,
with file:line:col) in its log and status file: the workers then need not log them.

A listing that is not synced (a source still bootstrapping, e.g. after an informer restart) never
replaces a synced snapshot: the workers keep enforcing everything until the source has listed it all.
A source with a `published(snapshot, policies, errors)` method (a PublicationListener) is told about
every snapshot the workers are to load, with the policy set built from it - and, once, about the
snapshot it found already published when its listing agrees with it (after an informer restart).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from celkeeper.errors import CelkeeperError
from celkeeper.informer.source import Listing, Source
from celkeeper.settings import Settings
from celkeeper.snapshot import (
    InformerRecord,
    InformerStatus,
    Snapshot,
    SnapshotStore,
    StateDir,
)
from celkeeper.snapshot.documents import DocumentCache

log = logging.getLogger("celkeeper.informer")

# what checking a snapshot found: every problem as a line, the policy set (None when it could not be
# built), and the errors behind the problems (each located in its item by `location.file`)
Checked = tuple[tuple[str, ...], Any, tuple[CelkeeperError, ...]]


class Informer:
    def __init__(
        self,
        source: Source,
        state: StateDir,
        settings: Settings,
        *,
        validate: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self.state = state
        self.settings = settings
        self.store = SnapshotStore(state.snapshot)
        self.record = InformerRecord(state.informer)
        self.clock = clock
        self._validate_enabled = validate
        self._documents = DocumentCache()
        self._compiler: Any = None
        previous = self.record.read()  # after a restart: problems already reported are not repeated
        self._problems: tuple[str, ...] = previous.problems if previous else ()
        self.last: Snapshot | None = self.store.latest()
        self.generation = self.last.generation if self.last else 0
        self._announced = False  # the listener has been told about the current snapshot

    # -- one round ----------------------------------------------------------------------------------
    def step(self) -> Snapshot | None:
        """List the source; publish when the content differs (or the file vanished).

        Returns the snapshot published, or None when nothing changed."""
        listing = self.source.listing()
        if not listing.synced and self.last is not None and self.last.synced:
            return None  # still bootstrapping: keep the complete snapshot the workers have
        candidate = self._snapshot(listing, self.generation + 1)
        if self.last is not None and candidate.content_key() == self.last.content_key():
            if self.store.stamp() is None:  # someone removed the file: put the same generation back
                log.warning("snapshot file %s vanished; publishing generation %d again",
                            self.store.path, self.last.generation)
                self.store.publish(self.last)
            if not self._announced and self._listener() is not None:
                self._announce(self.last, self._check(self.last))
            return None
        self.store.publish(candidate)
        self.generation, self.last = candidate.generation, candidate
        checked = self._check(candidate)
        problems, policies, _errors = checked
        templates = len(policies.templates) if policies is not None else 0
        constraints = len(policies.constraints) if policies is not None else 0
        self._report(candidate, problems, templates, constraints)
        self._announce(candidate, checked)
        return candidate

    def _listener(self) -> Callable[..., None] | None:
        found = getattr(self.source, "published", None)
        return found if callable(found) else None

    def _announce(self, snapshot: Snapshot, checked: Checked) -> None:
        self._announced = True
        listener = self._listener()
        if listener is None:
            return
        try:
            listener(snapshot, checked[1], checked[2])
        except Exception:  # the listener's trouble must not stop publication
            log.exception("the source could not take note of snapshot generation %d", snapshot.generation)

    def _snapshot(self, listing: Listing, generation: int) -> Snapshot:
        # only what the workers need: files with templates or constraints (or that do not parse);
        # gator suites and sample objects next to the policies are left out
        items = tuple(i for i in listing.items if self._documents.relevant(i))
        self._documents.retain(listing.items)
        return Snapshot(
            generation=generation,
            created=self.clock(),
            source=self.source.description,
            synced=listing.synced,
            items=items,
            namespaces=listing.namespaces,
            namespaces_complete=listing.namespaces_complete,
            problems=listing.problems,
        )

    def _check(self, snapshot: Snapshot) -> Checked:
        parsed = self._documents.policy_documents(snapshot.items)
        problems = list(snapshot.problems) + [str(e) for e in parsed.errors]
        if not self._validate_enabled:
            return tuple(problems), None, tuple(parsed.errors)
        try:
            from celkeeper.cel import get_engine
            from celkeeper.policy import TemplateCompiler, build_policy_set

            if self._compiler is None:
                self._compiler = TemplateCompiler(get_engine(self.settings.engine, self.settings.limits))
            policies = build_policy_set(parsed.documents, self._compiler)
        except Exception as err:  # a bug must not stop publication: report it and go on
            log.exception("could not check the policies of generation %d", snapshot.generation)
            problems.append(f"internal error while checking policies: {err}")
            return tuple(problems), None, tuple(parsed.errors)
        problems.extend(str(e) for e in policies.errors)
        return tuple(problems), policies, (*parsed.errors, *policies.errors)

    def _report(
        self, snapshot: Snapshot, problems: tuple[str, ...], templates: int, constraints: int
    ) -> None:
        known = set(self._problems)
        for problem in problems:
            if problem not in known:
                log.warning("policy problem: %s", problem)
        for problem in self._problems:
            if problem not in set(problems):
                log.info("policy problem resolved: %s", problem)
        self._problems = problems
        log.info(
            "published snapshot generation %d from %s: %d file(s), %d template(s), %d constraint(s), "
            "%d problem(s)",
            snapshot.generation, snapshot.source, len(snapshot.items), templates, constraints, len(problems),
        )
        self.record.write(
            InformerStatus(
                pid=os.getpid(),
                source=snapshot.source,
                generation=snapshot.generation,
                published_at=snapshot.created,
                synced=snapshot.synced,
                items=len(snapshot.items),
                problems=problems,
                templates=templates,
                constraints=constraints,
            )
        )

    # -- the loop -------------------------------------------------------------------------------------
    def run(self, stop: threading.Event, interval: float = 1.0) -> None:
        self.source.start()
        log.info("informer started on %s (pid %d)", self.source.description, os.getpid())
        previous = self.record.read()
        self.record.write(  # known to be alive (and by which pid) before its first publication
            InformerStatus(
                pid=os.getpid(),
                source=self.source.description,
                generation=self.generation,
                published_at=self.last.created if self.last else 0.0,
                synced=self.last.synced if self.last else False,
                items=len(self.last.items) if self.last else 0,
                problems=previous.problems if previous else (),
                templates=previous.templates if previous else 0,
                constraints=previous.constraints if previous else 0,
            )
        )
        try:
            while not stop.is_set():
                try:
                    self.step()
                except Exception:  # keep serving the last snapshot; try again next round
                    log.exception("informer round failed")
                    stop.wait(1.0)
                self.source.wait(interval)
        finally:
            self.source.close()
