"""The informer: one process per server that lists a Source and publishes snapshots.

    informer = Informer(source, state, settings)
    informer.run(stop)          # until `stop` is set: list, publish when different, wait

Generations grow by one per publication of different content and continue across informer
restarts (the last published snapshot is read back). After publishing, the informer builds the
policy set itself once to report every problem (parse errors, template and constraint errors,
with file:line:col) in its log and status file: the workers then need not log them.

A listing that is not synced (a source still bootstrapping, e.g. after an informer restart) never
replaces a synced snapshot: the workers keep enforcing everything until the source has listed it all.

Fail-static: a good policy set is never replaced by a smaller or broken one by accident.
- An item (a file, an API object) is *good* once published without problems located in it.
- A changed item whose new version has problems located in it (YAML/JSON errors, an invalid
  template, a template that stops compiling, an invalid constraint), or that no longer holds any
  policy (emptied), or that the source cannot use (unreadable, too large, not UTF-8: Listing.failed)
  is published at its last good version instead (`Snapshot.held`); the problems of the version held
  back are reported (log, informer status, /readyz, celkeeper_policy_load_errors) with file:line:col.
- An item that was never good is published as it is, problems and all (`Snapshot.unproven`): a
  template that never compiled is loaded as Gatekeeper loads it, its compile errors becoming
  evaluation errors of each request under its failurePolicy. Only a *change* that
  breaks a good item is held back.
- An item the source no longer lists is deleted (an explicit deletion is honoured), unless the
  listing is incomplete (the folder vanished) or names it in `keep` (gone for a moment).
The last good versions survive informer restarts: they are what the published snapshot holds.
A source with a `published(snapshot, policies, errors)` method (a PublicationListener) is told about
every snapshot the workers are to load, with the policy set built from it - and, once, about the
snapshot it found already published when its listing agrees with it (after an informer restart).
"""

from __future__ import annotations

import gc
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from celkeeper.errors import (
    AdmissionPolicyError,
    AdmissionPolicyNote,
    CelkeeperError,
    DocumentError,
    Location,
)
from celkeeper.informer.source import Listing, PublicationListener, Source
from celkeeper.native.ffi import release_file_pages, trim
from celkeeper.settings import Settings
from celkeeper.snapshot import (
    InformerRecord,
    InformerStatus,
    Snapshot,
    SnapshotItem,
    SnapshotStore,
    StateDir,
    digest,
)
from celkeeper.snapshot.documents import DocumentCache

if TYPE_CHECKING:  # imported when checking: the engine loads only then
    from celkeeper.policy import PolicySet, TemplateCompiler

log = logging.getLogger("celkeeper.informer")

_DELETE_HINT = "to remove its policies, delete the file"


class Checked(NamedTuple):
    """What checking a snapshot found."""

    problems: tuple[str, ...]
    """Every problem, one line each."""
    policies: PolicySet | None
    """The policy set; None when it could not be built (or checking is off)."""
    errors: tuple[CelkeeperError, ...]
    """The errors behind the problems, each located in its item by `location.file`."""


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
        self._compiler: TemplateCompiler | None = None  # while a round checks (_release_programs)
        self._listed: tuple[object, ...] | None = None  # the listing the last round ended with
        self._check_failed = False  # checking failed this round (an internal error)
        previous = self.record.read()  # after a restart: problems already reported are not repeated
        self._problems: tuple[str, ...] = previous.problems if previous else ()
        self.last: Snapshot | None = self.store.latest()
        self.generation = self.last.generation if self.last else 0
        self._announced = False  # the listener has been told about the current snapshot
        # the last good version of every item (fail-static), from what is published
        last = self.last
        self._good: dict[str, SnapshotItem] = (
            {i.name: i for i in last.items if i.name not in set(last.unproven)} if last else {}
        )

    # -- one round ----------------------------------------------------------------------------------
    def step(self) -> Snapshot | None:
        """List the source; publish when the content differs (or the file vanished).

        Returns the snapshot published, or None when nothing changed."""
        try:
            return self._step()
        finally:
            self._release_programs()

    def _step(self) -> Snapshot | None:
        self._check_failed = False
        listing = self.source.listing()
        if not listing.synced and self.last is not None and self.last.synced:
            return None  # still bootstrapping: keep the complete snapshot the workers have
        key = _listing_key(listing)
        if key == self._listed:
            # the listing the last round ended with: checking it again from the state that round left
            # finds the same snapshot (fail-static reaches its fixed point in one round), so it is not
            # compiled again
            self._unchanged()
            return None
        candidate, checked = self._fail_static(listing, self.generation + 1)
        if self.last is not None and candidate.content_key() == self.last.content_key():
            self._unchanged()
            self._remember(key)
            return None
        self.store.publish(candidate)
        self.generation, self.last = candidate.generation, candidate
        problems, policies, _errors = checked
        templates = len(policies.templates) if policies is not None else 0
        constraints = len(policies.constraints) if policies is not None else 0
        self._report(candidate, problems, templates, constraints)
        self._announce(candidate, checked)
        self._remember(key)
        return candidate

    def _unchanged(self) -> None:
        """What a round that publishes nothing new still does."""
        assert self.last is not None
        if self.store.stamp() is None:  # someone removed the file: put the same generation back
            log.warning(
                "snapshot file %s vanished; publishing generation %d again",
                self.store.path,
                self.last.generation,
            )
            self.store.publish(self.last)
        if not self._announced and self._listener() is not None:
            self._announce(self.last, self._check(self.last))

    def _remember(self, key: tuple[object, ...]) -> None:
        """The listing this round ended with, unless checking failed (it is then tried again)."""
        self._listed = None if self._check_failed else key

    def _release_programs(self) -> None:
        """Give back what compiling the policies took once a round has checked them: the compiled
        programs (the workers compile their own; the next change is compiled afresh), the memory
        the Go runtime no longer uses and the library's code pages mapped for the round; where the
        library runs in a child process (a webhook pod's informer: informer/libraryprocess.py), the
        child ends. The informer evaluates nothing."""
        if self._compiler is None:
            return
        self._compiler = None
        gc.collect()  # a policy set may sit in reference cycles: its programs' handles go now
        trim()
        release_file_pages()

    # -- fail-static (see the module docstring) -----------------------------------------------------
    def _fail_static(self, listing: Listing, generation: int) -> tuple[Snapshot, Checked]:
        """The snapshot to publish for this listing, and what checking it found (with the problems of
        the versions held back, located in their items)."""
        items = {i.name: i for i in listing.items}
        held: dict[str, list[CelkeeperError]] = {}  # name -> why its last good version is published
        unusable: list[str] = []  # problems of items the source cannot use and that were never good
        for name, problem in listing.failed.items():
            if name in self._good:
                items[name] = self._good[name]
                held[name] = [DocumentError(problem.removeprefix(f"{name}: "), Location(file=name))]
            else:
                unusable.append(problem)
        kept = set(listing.keep) if listing.complete else set(self._good) - set(listing.failed)
        for name in kept - items.keys():
            if name in self._good:
                items[name] = self._good[name]  # gone for a moment, or out of sight: not a deletion
        snapshot, checked = self._checked(listing, items, held, unusable, generation)
        suspects = self._broken_changes(items, snapshot, checked)
        if suspects:
            # each suspect on its own, the others at their last good version: a constraint that only
            # failed because its template broke in the same round is not held back with it
            trial_items = dict(items)
            for name, known in suspects.items():
                why = known
                if why is None:
                    alone = {**trial_items, **{n: self._good[n] for n in suspects if n != name}}
                    _, alone_checked = self._checked(listing, alone, held, unusable, generation)
                    why = _by_item(alone_checked.errors).get(name)
                if why:
                    held[name] = why
                    items[name] = self._good[name]
            snapshot, checked = self._checked(listing, items, held, unusable, generation)
        located = _by_item(checked.errors)
        for item in snapshot.items:
            if item.name not in held and item.name not in located:
                self._good[item.name] = item
        names = {i.name for i in snapshot.items} | set(items)
        self._good = {n: i for n, i in self._good.items() if n in names}  # deleted: forgotten
        held_back = tuple(HeldBack(err) for name in snapshot.held for err in held.get(name, ()))
        return snapshot, checked._replace(errors=(*checked.errors, *held_back))

    def _checked(
        self,
        listing: Listing,
        items: dict[str, SnapshotItem],
        held: dict[str, list[CelkeeperError]],
        unusable: list[str],
        generation: int,
    ) -> tuple[Snapshot, Checked]:
        notes = [str(HeldBack(err)) for name in sorted(held) for err in held[name]]
        snapshot = self._snapshot(
            listing,
            [items[n] for n in sorted(items)],
            generation,
            (*listing.problems, *unusable, *notes),
            tuple(sorted(held)),
        )
        checked = self._check(snapshot)
        located = _by_item(checked.errors)
        unproven = tuple(i.name for i in snapshot.items if i.name in located and i.name not in self._good)
        if unproven:
            snapshot = replace(snapshot, unproven=unproven)
        return snapshot, checked

    def _broken_changes(
        self, items: dict[str, SnapshotItem], snapshot: Snapshot, checked: Checked
    ) -> dict[str, list[CelkeeperError] | None]:
        """Items changed from a good version into one that has problems (None: to be checked on its
        own) or holds no policy any more (why)."""
        located = _by_item(checked.errors)
        published = {i.name for i in snapshot.items}
        broken: dict[str, list[CelkeeperError] | None] = {}
        for name, item in items.items():
            good = self._good.get(name)
            if good is None or good.digest == item.digest:
                continue
            if name in located:
                broken[name] = None
            elif name not in published:
                why = f"holds no template or constraint any more ({_DELETE_HINT})"
                broken[name] = [DocumentError(why, Location(file=name))]
        return broken

    def _listener(self) -> PublicationListener | None:
        return self.source if isinstance(self.source, PublicationListener) else None

    def _announce(self, snapshot: Snapshot, checked: Checked) -> None:
        self._announced = True
        listener = self._listener()
        if listener is None:
            return
        try:
            listener.published(snapshot, checked.policies, checked.errors)
        except Exception:  # the listener's trouble must not stop publication
            log.exception("the source could not take note of snapshot generation %d", snapshot.generation)

    def _snapshot(
        self,
        listing: Listing,
        items: list[SnapshotItem],
        generation: int,
        problems: tuple[str, ...],
        held: tuple[str, ...],
    ) -> Snapshot:
        # only what the workers need: files with templates or constraints (or that do not parse);
        # gator suites and sample objects next to the policies are left out
        relevant = self._documents.relevant_items(items, admission=self.settings.enforce_admission_policies)
        self._documents.retain(items)
        return Snapshot(
            generation=generation,
            created=self.clock(),
            source=self.source.description,
            synced=listing.synced,
            items=relevant,
            namespaces=listing.namespaces,
            namespaces_complete=listing.namespaces_complete,
            problems=problems,
            held=tuple(h for h in held if h in {i.name for i in relevant}),
            synced_kinds=listing.synced_kinds,
        )

    def _check(self, snapshot: Snapshot) -> Checked:
        parsed = self._documents.policy_documents(snapshot.items)
        problems = list(snapshot.problems) + [str(e) for e in parsed.errors]
        if not self._validate_enabled:
            return Checked(tuple(problems), None, tuple(parsed.errors))
        try:
            from celkeeper.cel import get_engine
            from celkeeper.policy import TemplateCompiler, build_policy_set

            if self._compiler is None:
                self._compiler = TemplateCompiler(get_engine(self.settings.engine, self.settings.limits))
            policies = build_policy_set(parsed.documents, self._compiler)
        except Exception as err:  # a bug must not stop publication: report it and go on
            log.exception("could not check the policies of generation %d", snapshot.generation)
            problems.append(f"internal error while checking policies: {err}")
            self._check_failed = True
            return Checked(tuple(problems), None, tuple(parsed.errors))
        problems.extend(str(e) for e in policies.errors)
        admission = self._check_admission_policies(snapshot)
        problems.extend(str(e) for e in admission)
        return Checked(tuple(problems), policies, (*parsed.errors, *policies.errors, *admission))

    def _check_admission_policies(self, snapshot: Snapshot) -> tuple[CelkeeperError, ...]:
        """What the API server would refuse among the admission policies the webhook enforces
        (--enforce-admission-policies), each located in its item: built as the workers build them, then
        released. A set that cannot be built at all is an error of each of its items."""
        if not self.settings.enforce_admission_policies:
            return ()
        try:
            built = self._documents.admission_policies(snapshot)
        except AdmissionPolicyError as err:
            selected = self._documents.admission_documents(snapshot.items)
            where = sorted({d.file for d in selected.policies})
            return tuple(AdmissionPolicyError(err.message, Location(file=name)) for name in where)
        if built is None:
            return ()
        with built:
            return tuple(p for p in built.problems if not isinstance(p, AdmissionPolicyNote))

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
            snapshot.generation,
            snapshot.source,
            len(snapshot.items),
            templates,
            constraints,
            len(problems),
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
                held=snapshot.held,
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
                held=previous.held if previous else (),
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


class HeldBack(CelkeeperError):
    """A problem of a version held back (its item's last good version is enforced instead)."""

    def __init__(self, err: CelkeeperError) -> None:
        super().__init__(f"{err.message}; keeping the last good version of {err.location.file}", err.location)


def _listing_key(listing: Listing) -> tuple[object, ...]:
    """Equal for two listings with the same content."""
    namespaces = digest(json.dumps(listing.namespaces, sort_keys=True)) if listing.namespaces else ""
    return (
        tuple((i.name, i.digest) for i in listing.items),
        listing.synced,
        namespaces,
        listing.namespaces_complete,
        listing.problems,
        tuple(sorted(listing.failed.items())),
        tuple(sorted(listing.keep)),
        listing.complete,
        listing.synced_kinds,
    )


def _by_item(errors: Iterable[CelkeeperError]) -> dict[str, list[CelkeeperError]]:
    """The problems located in each item (by the item's name, the file of their location)."""
    out: dict[str, list[CelkeeperError]] = {}
    for err in errors:
        name = err.location.file
        if name:
            out.setdefault(name, []).append(err)
    return out
