"""The webhook's own TLS, managed like Gatekeeper's cert-controller: a CA and a serving certificate kept
in a Secret, the CA bundle injected into celkeeper's webhook configurations, the current pair written to
this pod's certificate folder (the server re-reads it on change, no restart).

    rotator = CertRotator(client, CertConfig(namespace, secret, webhook_configurations, cert_dir, policy))
    rotator.reconcile()          # once at start (before serving), then by the controller loop
    rotator.register(manager)    # watch the Secret and the configurations: a change wakes the loop

Leaderless: every pod runs it. Each reconcile reads the Secret and the configurations, injects the
Secret's bundle where it is missing, lets `celkeeper.pki.plan_rotation` decide whether the Secret must
change (missing, expiring or broken certificates; a CA rotation in two steps), writes it with the
resourceVersion it read (a conflict means another pod wrote first: re-read, and stop when what is
stored is already good) and finally writes the files. Every write is idempotent; nothing is written when
everything is current, so pods that agree never write. The Secret itself comes with the manifests (an
empty Opaque Secret), so the pods need no right to create Secrets; one that is missing is created when
the pod may.

celkeeper's controller (celkeeper.incluster): celkeeper's own Secret and webhook configurations.
"""

from __future__ import annotations

import base64
import copy
import datetime
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celkeeper.kube.client import ApiError, Client
from celkeeper.kube.manager import Event, WatchManager
from celkeeper.kube.resources import (
    Resource,
    mutating_webhook_configuration,
    secret,
    validating_webhook_configuration,
)
from celkeeper.kube.writes import WRITE_ATTEMPTS
from celkeeper.localfiles import write_atomic
from celkeeper.pki import (
    CA_BUNDLE,
    NEXT_CA_CERT,
    NEXT_CA_SINCE,
    SERVING_CERT,
    SERVING_KEY,
    RotationPolicy,
    bundle_trusts,
    plan_rotation,
    trusted_bundle,
)

log = logging.getLogger("celkeeper.incluster")

REGISTRAR = "certificates"
SYSTEM_LABEL = "celkeeper.io/system"
Clock = Callable[[], datetime.datetime]


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class CertConfig:
    namespace: str
    secret_name: str
    webhook_configurations: tuple[str, ...]
    cert_dir: Path
    policy: RotationPolicy
    mutating_webhook_configurations: tuple[str, ...] = ()

    def configurations(self) -> list[Resource]:
        """Every webhook configuration whose caBundle the pods keep current, validating then mutating."""
        return [validating_webhook_configuration(n) for n in self.webhook_configurations] + [
            mutating_webhook_configuration(n) for n in self.mutating_webhook_configurations
        ]

    @property
    def cert_file(self) -> Path:
        return self.cert_dir / SERVING_CERT

    @property
    def key_file(self) -> Path:
        return self.cert_dir / SERVING_KEY


def decode_data(obj: Mapping[str, Any] | None) -> dict[str, bytes]:
    """A Secret's data as bytes (values that are not base64 are left out)."""
    found: dict[str, bytes] = {}
    for key, value in ((obj or {}).get("data") or {}).items():
        try:
            found[str(key)] = base64.b64decode(str(value), validate=True)
        except ValueError:
            continue
    return found


def encode_data(data: Mapping[str, bytes]) -> dict[str, str]:
    return {key: base64.b64encode(value).decode("ascii") for key, value in sorted(data.items())}


def inject_bundle(config: Mapping[str, Any], bundle: bytes) -> dict[str, Any]:
    """A copy of a webhook configuration whose every webhook trusts `bundle` (clientConfig.caBundle)."""
    out = copy.deepcopy(dict(config))
    encoded = base64.b64encode(bundle).decode("ascii")
    for webhook in out.get("webhooks") or ():
        if isinstance(webhook, dict):
            webhook.setdefault("clientConfig", {})["caBundle"] = encoded
    return out


def webhook_bundles(config: Mapping[str, Any]) -> list[bytes]:
    found = []
    for webhook in config.get("webhooks") or ():
        raw = ((webhook or {}).get("clientConfig") or {}).get("caBundle") or ""
        try:
            found.append(base64.b64decode(str(raw), validate=True))
        except ValueError:
            found.append(b"")
    return found


class CertRotator:
    def __init__(
        self,
        client: Client,
        config: CertConfig,
        *,
        clock: Clock = utc_now,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.clock = clock
        self.on_change = on_change
        self.secret_resource = Resource("", "v1", "secrets", "Secret", namespace=config.namespace)
        self.watched = {secret(config.namespace, config.secret_name), *config.configurations()}
        self.dirty = True
        self.writes = 0  # Secret and configuration writes this pod made (logs, tests)
        self.files_written = 0
        self._missing_logged: set[str] = set()
        self._wake_at: datetime.datetime | None = None

    # -- the controller loop ------------------------------------------------------------------
    def register(self, manager: WatchManager) -> None:
        manager.register(REGISTRAR, self.handle, self.watched)

    def handle(self, event: Event) -> None:
        self.dirty = True
        if self.on_change is not None:
            self.on_change()

    def wake_in(self) -> float | None:
        """Seconds until a staged CA may be promoted (the loop runs this reconciler again then)."""
        if self._wake_at is None:
            return None
        return max(0.5, (self._wake_at - self.clock()).total_seconds())

    def reconcile(self) -> None:
        stored = self._read_secret()
        data = decode_data(stored)
        configs = self._inject(trusted_bundle(data)) if data else {}
        now = self.clock()
        plan = plan_rotation(data, now, self.config.policy, next_ca_published=self._published(data, configs))
        if plan is not None:
            stored = self._write_secret(stored, plan.data, plan.reason)
            data = decode_data(stored)
            self._inject(trusted_bundle(data))
        self._write_files(data)
        since = data.get(NEXT_CA_SINCE)
        self._wake_at = None
        if since:
            try:
                staged = datetime.datetime.fromisoformat(since.decode())
            except ValueError:
                staged = now
            self._wake_at = staged + self.config.policy.ca_overlap

    # -- the Secret ---------------------------------------------------------------------------
    def _read_secret(self) -> dict[str, Any] | None:
        try:
            return self.client.get(self.secret_resource, self.config.secret_name)
        except ApiError as err:
            if err.not_found:
                return None
            raise

    def _write_secret(
        self, stored: dict[str, Any] | None, data: dict[str, bytes], reason: str
    ) -> dict[str, Any]:
        name = self.config.secret_name
        for _ in range(WRITE_ATTEMPTS):
            try:
                if stored is None:
                    body = {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "type": "Opaque",
                        "metadata": {
                            "name": name,
                            "namespace": self.config.namespace,
                            "labels": {SYSTEM_LABEL: "yes"},
                        },
                        "data": encode_data(data),
                    }
                    written = self.client.create(self.secret_resource, body)
                else:
                    body = {**stored, "data": encode_data(data)}
                    written = self.client.replace(self.secret_resource, name, body)
                self.writes += 1
                log.info("certificate Secret %s/%s written: %s", self.config.namespace, name, reason)
                return written
            except ApiError as err:
                if err.status == 403 and stored is None:
                    raise ApiError(
                        403,
                        "Forbidden",
                        f"the Secret {self.config.namespace}/{name} does not "
                        f"exist and this pod may not create it: apply the manifests "
                        f"(deploy/celkeeper.yaml) that create it ({err})",
                    ) from err
                if not err.conflict:
                    raise
            # another pod wrote first: keep what it wrote when it is good
            stored = self._read_secret()
            fresh = decode_data(stored)
            # (never promote a staged CA on this path: whether it is published was not checked again)
            plan = plan_rotation(fresh, self.clock(), self.config.policy, next_ca_published=False)
            if stored is not None and plan is None:
                return stored
            if plan is not None:
                data, reason = plan.data, plan.reason
        raise ApiError(409, "Conflict", f"Secret {name} kept changing while being written")

    # -- the files this pod serves ------------------------------------------------------------
    def _write_files(self, data: Mapping[str, bytes]) -> None:
        cert, key = data.get(SERVING_CERT), data.get(SERVING_KEY)
        if not cert or not key:
            return
        self.config.cert_dir.mkdir(parents=True, exist_ok=True)
        changed = False
        # the key first: a server that reads between the two writes sees a pair that does not match
        # and keeps serving the old one (celkeeper.tls.ServerTLS)
        for path, content, mode in (
            (self.config.key_file, key, 0o600),
            (self.config.cert_file, cert, 0o644),
            (self.config.cert_dir / "ca.crt", trusted_bundle(data), 0o644),
        ):
            try:
                if path.read_bytes() == content:
                    continue
            except OSError:
                pass
            write_atomic(path, content, mode)
            changed = True
        if changed:
            self.files_written += 1
            log.info("serving certificate written to %s", self.config.cert_dir)

    # -- the webhook configurations -----------------------------------------------------------
    def _inject(self, bundle: bytes) -> dict[str, dict[str, Any]]:
        """Make every configuration trust `bundle`; return them as stored afterwards (found ones only)."""
        found: dict[str, dict[str, Any]] = {}
        for resource in self.config.configurations():
            stored = self._inject_one(resource, bundle)
            if stored is not None:
                found[f"{resource.kind}/{resource.field_selector}"] = stored
        return found

    def _inject_one(self, resource: Resource, bundle: bytes) -> dict[str, Any] | None:
        kind = resource.kind
        name = (resource.field_selector or "").removeprefix("metadata.name=")
        for _ in range(WRITE_ATTEMPTS):
            try:
                stored = self.client.get(resource, name)
            except ApiError as err:
                if not err.not_found:
                    raise
                if f"{kind}/{name}" not in self._missing_logged:
                    self._missing_logged.add(f"{kind}/{name}")
                    log.warning(
                        "%s %s not found: its caBundle is set once it exists",
                        kind,
                        name,
                    )
                return None
            self._missing_logged.discard(f"{kind}/{name}")
            if all(found == bundle for found in webhook_bundles(stored)):
                return stored
            try:
                written = self.client.replace(resource, name, inject_bundle(stored, bundle))
            except ApiError as err:
                if not err.conflict:
                    raise
                continue
            self.writes += 1
            log.info("caBundle of %s %s updated", kind, name)
            return written
        raise ApiError(409, "Conflict", f"{kind} {name} kept changing")

    @staticmethod
    def _published(data: Mapping[str, bytes], configs: Mapping[str, Mapping[str, Any]]) -> bool:
        staged = data.get(NEXT_CA_CERT)
        if not staged:
            return True
        return all(
            bundle_trusts(found, staged) for config in configs.values() for found in webhook_bundles(config)
        )


__all__ = ["CA_BUNDLE", "CertConfig", "CertRotator", "decode_data", "encode_data", "inject_bundle"]
