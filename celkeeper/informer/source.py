"""Where policies come from: a pluggable Source the informer process polls or waits on.

A Source lists the *whole* current content every time (`listing()`); the informer publishes a new
snapshot when the listing differs from the last one. `wait()` returns when something may have
changed (a folder source polls; an API source returns on a watch event) or after `timeout`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from celkeeper.errors import CelkeeperError
from celkeeper.model import JsonValue
from celkeeper.snapshot import Snapshot, SnapshotItem

if TYPE_CHECKING:
    from celkeeper.policy import PolicySet


@dataclass(frozen=True)
class Listing:
    items: tuple[SnapshotItem, ...]  # policy sources (files, API objects as JSON), sorted by name
    synced: bool  # everything that existed when the source started is in `items`
    namespaces: Mapping[str, Mapping[str, JsonValue]] = field(default_factory=dict)
    namespaces_complete: bool = False  # see Snapshot.namespaces_complete
    problems: tuple[str, ...] = ()  # the source's own problems (lost watch, missing folder), one line each
    # Fail-static (the informer keeps the last good version of these; see informer/loop.py):
    failed: Mapping[str, str] = field(default_factory=dict)  # name -> why it cannot be used now
    keep: frozenset[str] = frozenset()  # names missing for a moment (not yet a deletion): keep quietly
    complete: bool = True  # False: the source could not see everything; a name it does not list is
    # not deleted (e.g. the policy folder vanished)
    synced_kinds: tuple[str, ...] = ()  # see Snapshot.synced_kinds


class Source(Protocol):
    @property
    def description(self) -> str:
        """What it reads, for logs and status: `folder:examples`, `kubernetes:https://...`."""

    def start(self) -> None:
        """Called once in the informer process before the first listing (start watches here)."""

    def listing(self) -> Listing: ...

    def wait(self, timeout: float) -> None:
        """Return when the content may have changed, or after `timeout` seconds at the latest."""

    def close(self) -> None: ...


@runtime_checkable
class PublicationListener(Protocol):
    """A Source that is told about every snapshot the workers are to load (informer/loop.py)."""

    def published(
        self, snapshot: Snapshot, policies: PolicySet | None, errors: Sequence[CelkeeperError]
    ) -> None:
        """`policies`: the policy set built from the snapshot (None when it could not be built);
        `errors`: every problem found, each located in its item by `location.file`."""
