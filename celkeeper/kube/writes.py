"""Writing an object until the API says what we want, when other pods may be writing it too.

    outcome = write_desired(client, resource, desired, stored, current=up_to_date, update_body=for_update)
    written = update_status(client, resource, name, change, stored=None)
    deleted = delete_if_present(client, resource, name, uid)

Leaderless writers settle races through the API: a create that finds the name taken, or a replace with
a stale resourceVersion, is a 409 conflict; the writer then re-reads the object and stops when it
already says what we want (another pod wrote the same), else tries again on the fresh copy.

Adapter (celkeeper.kube): generic write-until-agreed helpers for any object (celkeeper's controllers,
the audit's status writes); what to write and when it is ours are the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from celkeeper.kube.client import ApiError, Client
from celkeeper.kube.resources import Resource

WRITE_ATTEMPTS = 4

Current = Callable[[Mapping[str, Any] | None, Mapping[str, Any]], bool]
Change = Callable[[Mapping[str, Any]], dict[str, Any] | None]
UpdateBody = Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]
Owned = Callable[[Mapping[str, Any]], bool]


class NotOurs(ApiError):
    """The object exists but is not one of ours (RBAC lets us write it; we do not)."""


def write_desired(
    client: Client,
    resource: Resource,
    desired: dict[str, Any],
    stored: Mapping[str, Any] | None,
    *,
    current: Current,
    update_body: UpdateBody,
    owned: Owned | None = None,
    attempts: int = WRITE_ATTEMPTS,
) -> Literal["created", "updated"] | None:
    """Create `desired` (nothing stored) or replace `stored` with `update_body(stored, desired)`.

    On a conflict the object is read again; when `current(stored, desired)` then holds, another writer
    got there first and None is returned. "created" or "updated" when this call wrote it. Other API
    failures raise, and so does an object still changing after `attempts` tries (409 Conflict).
    With `owned`, an existing object is replaced only when `owned(stored)` (else NotOurs): what RBAC
    cannot restrict (the names of objects we may create), the writer does.
    """
    name = desired["metadata"]["name"]
    for _ in range(attempts):
        if stored is not None and owned is not None and not owned(stored):
            raise NotOurs(409, "Conflict", f"{resource.kind} {name} exists and is not ours (left alone)")
        try:
            if stored is None:
                client.create(resource, desired)
                return "created"
            client.replace(resource, name, update_body(stored, desired))
            return "updated"
        except ApiError as err:
            if not err.conflict:
                raise
        # someone else wrote it first: re-read, and stop if it already says what we want
        try:
            stored = client.get(resource, name)
        except ApiError as err:
            if not err.not_found:
                raise
            stored = None
        if current(stored, desired):
            return None
    raise ApiError(409, "Conflict", f"{resource.kind} {name} kept changing while being written")


def update_status(
    client: Client,
    resource: Resource,
    name: str,
    change: Change,
    *,
    stored: Mapping[str, Any] | None = None,
    attempts: int = WRITE_ATTEMPTS,
) -> bool:
    """Write an object's status subresource: `change(current)` is the body to PUT (the object as read,
    resourceVersion included, with its new status) or None when nothing is to be written (the status is
    right already, or `current` is not the object meant). A conflict reads the object again and asks
    `change` again. `stored`: the object as last seen (else it is read first).

    True when this call wrote; False when the object does not exist or `change` said no. Other API
    failures raise, and so does an object still changing after `attempts` tries (409 Conflict)."""
    current = stored
    for _ in range(attempts):
        if current is None:
            try:
                current = client.get(resource, name)
            except ApiError as err:
                if err.not_found:
                    return False
                raise
        body = change(current)
        if body is None:
            return False
        try:
            client.replace(resource, name, body, subresource="status")
            return True
        except ApiError as err:
            if err.not_found:
                return False
            if not err.conflict:
                raise
        current = None  # someone else wrote it first: read it again
    raise ApiError(409, "Conflict", f"status of {resource.kind} {name} kept changing while being written")


def delete_if_present(client: Client, resource: Resource, name: str, uid: str) -> bool:
    """Delete the object (only that incarnation when `uid` is given); False when it is gone already
    or was replaced by a new one meanwhile (404, or 409 on the uid precondition)."""
    try:
        client.delete(resource, name, uid=uid or None)
    except ApiError as err:
        if err.not_found or err.conflict:
            return False
        raise
    return True
