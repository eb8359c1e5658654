"""The Flask app of one webhook worker. Nothing happens at import: `create_app` builds everything.

    app = create_app(WebhookConfig(settings=..., state=StateDir(...)))

Routes: POST /v1/admit, POST /v1/admitlabel (who may carry the ignore label), POST /v1/admitpolicy
(celkeeper's own templates and constraints, checked when applied: webhook/policycheck.py), GET /healthz
(the process answers), GET /readyz (this worker has loaded and compiled a complete snapshot; the body names
the CEL engine and lists what it enforces and every policy problem), GET /metrics.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from wsgiref.types import InputStream, StartResponse, WSGIApplication, WSGIEnvironment

import orjson
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from celkeeper.settings import Settings
from celkeeper.snapshot import StateDir
from celkeeper.webhook.admission import Admission, bad_request, label_guard
from celkeeper.webhook.export import DecisionExport
from celkeeper.webhook.live import LivePolicies
from celkeeper.webhook.metrics import WebhookMetrics
from celkeeper.webhook.policycheck import PolicyAdmission

log = logging.getLogger("celkeeper.webhook")

JSON = "application/json"
JSON_HEADERS = [("Content-Type", JSON)]
DRAIN_LIMIT = 64 * 1024 * 1024  # an oversized body up to this size is read (and dropped) before the 413
_REASONS = {200: "200 OK", 400: "400 BAD REQUEST", 413: "413 REQUEST ENTITY TOO LARGE"}


def _drain(stream: InputStream, length: int | None) -> None:
    """Read and drop what is left of a request body, so that a client still sending it gets to read
    the answer (most clients only read once they have sent everything)."""
    left = DRAIN_LIMIT if length is None else min(length, DRAIN_LIMIT)
    while left > 0:
        chunk = stream.read(min(left, 256 * 1024))
        if not chunk:
            return
        left -= len(chunk)


class AdmitEndpoint:
    """POST /v1/admit: read the body (bounded), answer with JSON.

    The one hot route is offered to the worker, which answers it without Gunicorn's parser, WSGI or
    Flask (`route`: webhook/worker.py's routes); under another server it is installed in front of Flask
    (`app.wsgi_app`) to skip Flask's request machinery; the Flask route for /v1/admit calls the same
    code. Every path answers identically.
    """

    def __init__(
        self, admission: Admission, metrics: WebhookMetrics, limit: int, inner: WSGIApplication
    ) -> None:
        self.admission = admission
        self.metrics = metrics
        self.limit = limit
        self.inner = inner

    def route(self, body: bytes, length: int) -> tuple[str, bytes]:
        """The worker's route: a request's body (dropped by the worker when over the limit) and its
        declared length, to the status line and the JSON answer."""
        if length > self.limit or len(body) > self.limit:
            status, payload = self._too_large()
        else:
            answer = self.admission.handle(body)
            status, payload = answer.status, orjson.dumps(answer.body)
        return _REASONS.get(status, str(status)), payload

    def answer(self, environ: WSGIEnvironment) -> tuple[int, bytes]:
        stream: InputStream = environ["wsgi.input"]
        try:
            length: int | None = int(environ.get("CONTENT_LENGTH") or "")
        except ValueError:
            length = None
        limit = self.limit
        if length is not None and length > limit:
            _drain(stream, length)
            return self._too_large()
        body = stream.read(length if length is not None else limit + 1)
        if len(body) > limit:
            _drain(stream, None)
            return self._too_large()
        answer = self.admission.handle(body)
        return answer.status, orjson.dumps(answer.body)

    def _too_large(self) -> tuple[int, bytes]:
        self.metrics.observe_request("invalid", "", 0.0)
        answer = bad_request(f"request body too large: the limit is {self.limit} bytes", 413)
        return 413, orjson.dumps(answer.body)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/v1/admit" and environ.get("REQUEST_METHOD") == "POST":
            status, payload = self.answer(environ)
            start_response(
                _REASONS.get(status, str(status)), [*JSON_HEADERS, ("Content-Length", str(len(payload)))]
            )
            return [payload]
        return self.inner(environ, start_response)


@dataclass(frozen=True)
class WebhookConfig:
    settings: Settings
    state: StateDir
    watch: bool = True  # refresh the policies in a background thread
    watch_interval: float = 0.2  # seconds between two looks at the snapshot
    log_denies: bool = False
    explain_denies: bool = False  # log the explanation of each denial (--log-denies=explain)
    # a request that arrives before this worker has any policies waits this long for them (then
    # the failure mode answers): a worker that starts with the server loads its first snapshot
    # in the background
    first_load_wait: float = 2.0
    fast_path: bool = True  # serve POST /v1/admit in front of Flask (see AdmitEndpoint)
    # gc.freeze() the loaded policies (a worker process of its own: not for in-process tests)
    freeze_gc: bool = False
    export_decisions: str | None = (
        None  # "stdout" or a file: every decision as a JSON line (webhook/export.py)
    )
    export_allowed: bool = False  # ... allowed requests without violations too
    pod_name: str = ""  # named in exported decisions


def synced_data(path: Path) -> dict[str, Any] | None:
    """What the informer says is synced (its data.json), or None."""
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _json(payload: Any, status: int = 200) -> Response:
    return Response(json.dumps(payload, separators=(",", ":")), status=status, mimetype=JSON)


def create_app(config: WebhookConfig, heartbeat: Callable[[], None] | None = None) -> Flask:
    settings = config.settings
    metrics = WebhookMetrics(config.state)

    def on_load(ok: bool) -> None:
        metrics.snapshot_loads.labels("ok" if ok else "error").inc()

    live = LivePolicies(config.state, settings, on_load=on_load, freeze_gc=config.freeze_gc)
    live.write_status()  # the worker is known (generation 0) before it has loaded anything
    live.load_first(heartbeat)  # a worker started while the server runs is ready before it serves
    if config.watch:
        live.start(config.watch_interval)
    export = (
        DecisionExport(
            config.export_decisions, pod=config.pod_name, allowed=config.export_allowed, counter=metrics
        )
        if config.export_decisions
        else None
    )
    admission = Admission(
        live,
        settings,
        metrics,
        log_denies=config.log_denies,
        explain_denies=config.explain_denies,
        first_load_wait=config.first_load_wait,
        export=export,
    )

    app = Flask("celkeeper.webhook")
    endpoint = AdmitEndpoint(admission, metrics, settings.max_request_bytes, app.wsgi_app)
    if config.fast_path:
        app.wsgi_app = endpoint  # type: ignore[method-assign]
    app.extensions["celkeeper"] = {
        "live": live,
        "admission": admission,
        "metrics": metrics,
        "export": export,
        "routes": {b"/v1/admit": endpoint.route} if config.fast_path else {},
    }

    @app.post("/v1/admit")
    def admit() -> Response:
        status, payload = endpoint.answer(request.environ)
        return Response(payload, status=status, mimetype=JSON)

    @app.post("/v1/admitlabel")
    def admitlabel() -> Response:
        limit = settings.max_request_bytes
        if (request.content_length or 0) > limit:
            answer = bad_request(f"request body too large: the limit is {limit} bytes", 413)
        else:
            answer = label_guard(request.get_data(cache=False), settings)
        return Response(orjson.dumps(answer.body), status=answer.status, mimetype=JSON)

    policy_admission = PolicyAdmission(live, settings.policy_validation)

    @app.post("/v1/admitpolicy")
    def admit_policy() -> Response:
        limit = settings.max_request_bytes
        if (request.content_length or 0) > limit:
            answer = bad_request(f"request body too large: the limit is {limit} bytes", 413)
        else:
            answer = policy_admission.handle(request.get_data(cache=False))
        return Response(orjson.dumps(answer.body), status=answer.status, mimetype=JSON)

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok\n", mimetype="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        loaded = live.current
        detail: dict[str, Any] = {
            "ready": live.ready,
            "worker": live.pid,
            "loop": threading.current_thread().name,  # the worker's event loop that answered
            "engine": settings.engine,
        }
        if loaded is None:
            detail["reason"] = "no snapshot loaded yet"
        else:
            if not live.ready:
                detail["reason"] = "the loaded snapshot does not yet list every policy of the source"
            detail.update(
                generation=loaded.generation,
                templates=len(loaded.policies.templates),
                constraints=len(loaded.policies.constraints),
                problems=list(loaded.problems),
            )
            if loaded.held:
                detail["heldBack"] = list(loaded.held)  # enforced at their last good version
            synced = synced_data(config.state.data_status)
            if synced is not None or loaded.synced_kinds:
                # ready waits for the first list of every kind synced at start (the snapshot is complete
                # only then); this is what is synced now, and how fresh (the informer's data.json)
                kinds = [{"kind": k, "synced": True} for k in loaded.synced_kinds]
                detail["syncedData"] = synced or {"kinds": kinds}
        if live.last_error:
            detail["lastError"] = live.last_error
        return _json(detail, 200 if live.ready else 503)

    @app.get("/metrics")
    def metrics_page() -> Response:
        data, content_type = metrics.render(request.headers.get("Accept"))
        return Response(data, content_type=content_type)

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        status = err.code or 500
        message = f"{err.name}: {err.description}" if err.description else err.name
        answer = bad_request(message, status)
        response = _json(answer.body, status)
        valid_methods = getattr(err, "valid_methods", None)
        if status == 405 and valid_methods:
            response.headers["Allow"] = ", ".join(valid_methods)
        return response

    @app.errorhandler(Exception)
    def internal_error(err: Exception) -> Response:
        log.error("internal error on %s %s: %s", request.method, request.path, err, exc_info=err)
        return _json({"code": 500, "error": "internal error (logged by the server)"}, 500)

    return app
