"""The WSGI application of one webhook worker. Nothing happens at import: `create_app` builds everything.

    app = create_app(WebhookConfig(settings=..., state=StateDir(...)))

Routes: POST /v1/admit, POST /v1/mutate (Gatekeeper's mutators: a JSONPatch), POST /v1/admitlabel (who
may carry the ignore label), POST /v1/admitpolicy (celkeeper's own templates and constraints, checked when
applied: webhook/policycheck.py), GET /healthz (the process answers), GET /readyz (this worker has loaded
and compiled a complete snapshot; the body names the CEL engine and lists what it enforces and every
policy problem), GET /metrics.

A plain WSGI application (`WebhookApp`: a table of routes, JSON answers): a web framework would cost
each worker ~15 MiB of imports for seven routes. POST /v1/admit and /v1/mutate are also offered to the
worker as routes of its own (webhook/worker.py), answered without Gunicorn's parser and WSGI.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any
from wsgiref.types import InputStream, StartResponse, WSGIEnvironment

import orjson

from celkeeper.settings import Settings
from celkeeper.snapshot import StateDir
from celkeeper.webhook.admission import Admission, Answer, bad_request, label_guard
from celkeeper.webhook.export import DecisionExport
from celkeeper.webhook.live import LivePolicies
from celkeeper.webhook.metrics import WebhookMetrics
from celkeeper.webhook.policycheck import PolicyAdmission

log = logging.getLogger("celkeeper.webhook")

JSON = "application/json"
JSON_HEADERS = [("Content-Type", JSON)]
DRAIN_LIMIT = 64 * 1024 * 1024  # an oversized body up to this size is read (and dropped) before the 413
_REASONS = {200: "200 OK", 400: "400 BAD REQUEST", 413: "413 REQUEST ENTITY TOO LARGE"}


def _status(code: int) -> str:
    """The status line's text, as Werkzeug words it (`413 REQUEST ENTITY TOO LARGE`)."""
    if code in _REASONS:
        return _REASONS[code]
    try:
        return f"{code} {HTTPStatus(code).phrase.upper()}"
    except ValueError:
        return str(code)


def _drain(stream: InputStream, length: int | None) -> None:
    """Read and drop what is left of a request body, so that a client still sending it gets to read
    the answer (most clients only read once they have sent everything)."""
    left = DRAIN_LIMIT if length is None else min(length, DRAIN_LIMIT)
    while left > 0:
        chunk = stream.read(min(left, 256 * 1024))
        if not chunk:
            return
        left -= len(chunk)


def _length(environ: WSGIEnvironment) -> int | None:
    try:
        return int(environ.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None


@dataclass(frozen=True)
class Reply:
    """A route's answer: status code, body, content type, and any further header fields."""

    status: int
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = ()


def json_reply(payload: Any, status: int = 200) -> Reply:
    return Reply(status, orjson.dumps(payload))


Handler = Callable[[WSGIEnvironment], Reply]


class WebhookApp:
    """The worker's WSGI application: handlers by path and method; any other request gets a JSON error
    (404, or 405 naming the methods allowed); a handler that fails gets a 500 (logged, no traceback
    sent). GET routes answer HEAD too (Gunicorn leaves the body out); OPTIONS gets the methods allowed.
    `extensions["celkeeper"]` holds what the worker and the tests reach: the live policies, the
    admission, the metrics, the decision export, and the worker's own routes."""

    def __init__(self) -> None:
        self._routes: dict[str, dict[str, Handler]] = {}
        self.extensions: dict[str, Any] = {}

    def route(self, method: str, path: str) -> Callable[[Handler], Handler]:
        def add(handler: Handler) -> Handler:
            self._routes.setdefault(path, {})[method] = handler
            return handler

        return add

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        reply = self._reply(environ)
        headers = [("Content-Type", reply.content_type), ("Content-Length", str(len(reply.body)))]
        start_response(_status(reply.status), [*headers, *reply.headers])
        return [reply.body]

    def _reply(self, environ: WSGIEnvironment) -> Reply:
        path = str(environ.get("PATH_INFO") or "/")
        method = str(environ.get("REQUEST_METHOD") or "GET")
        handlers = self._routes.get(path)
        if handlers is None:
            return _error(
                404,
                "Not Found: the webhook serves /v1/admit, /v1/mutate, /v1/admitlabel, /v1/admitpolicy, "
                "/healthz, /readyz and /metrics",
            )
        handler = handlers.get("GET" if method == "HEAD" else method)
        if handler is None:
            allowed = sorted({*handlers, "OPTIONS", *(["HEAD"] if "GET" in handlers else [])})
            allow = (("Allow", ", ".join(allowed)),)
            if method == "OPTIONS":
                return Reply(200, b"", "text/plain", allow)
            reply = _error(405, f"Method Not Allowed: {method} {path}")
            return Reply(reply.status, reply.body, reply.content_type, allow)
        try:
            return handler(environ)
        except Exception as err:
            log.error("internal error on %s %s: %s", method, path, err, exc_info=err)
            return json_reply({"code": 500, "error": "internal error (logged by the server)"}, 500)


def _error(status: int, message: str) -> Reply:
    answer = bad_request(message, status)
    return json_reply(answer.body, status)


class ReviewEndpoint:
    """POST /v1/admit and POST /v1/mutate: read the body (bounded), answer with JSON (`handle`: the
    AdmissionReview's answer).

    The hot routes are offered to the worker, which answers them without Gunicorn's parser and WSGI
    (`route`: webhook/worker.py's routes); the WSGI route (`answer`) runs the same code, so both answer
    identically.
    """

    def __init__(self, handle: Callable[[bytes], Answer], metrics: WebhookMetrics, limit: int) -> None:
        self.handle = handle
        self.metrics = metrics
        self.limit = limit

    def route(self, body: bytes, length: int) -> tuple[str, bytes]:
        """The worker's route: a request's body (dropped by the worker when over the limit) and its
        declared length, to the status line and the JSON answer."""
        if length > self.limit or len(body) > self.limit:
            status, payload = self._too_large()
        else:
            answer = self.handle(body)
            status, payload = answer.status, orjson.dumps(answer.body)
        return _REASONS.get(status, str(status)), payload

    def answer(self, environ: WSGIEnvironment) -> tuple[int, bytes]:
        stream: InputStream = environ["wsgi.input"]
        length = _length(environ)
        limit = self.limit
        if length is not None and length > limit:
            _drain(stream, length)
            return self._too_large()
        body = stream.read(length if length is not None else limit + 1)
        if len(body) > limit:
            _drain(stream, None)
            return self._too_large()
        answer = self.handle(body)
        return answer.status, orjson.dumps(answer.body)

    def _too_large(self) -> tuple[int, bytes]:
        self.metrics.observe_request("invalid", "", 0.0)
        answer = bad_request(f"request body too large: the limit is {self.limit} bytes", 413)
        return 413, orjson.dumps(answer.body)


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
    fast_path: bool = True  # offer the worker its own route for POST /v1/admit (see AdmitEndpoint)
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


def create_app(config: WebhookConfig, heartbeat: Callable[[], None] | None = None) -> WebhookApp:
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

    app = WebhookApp()
    endpoint = ReviewEndpoint(admission.handle, metrics, settings.max_request_bytes)
    mutating = ReviewEndpoint(admission.handle_mutation, metrics, settings.max_request_bytes)
    app.extensions["celkeeper"] = {
        "live": live,
        "admission": admission,
        "metrics": metrics,
        "export": export,
        "routes": {b"/v1/admit": endpoint.route, b"/v1/mutate": mutating.route} if config.fast_path else {},
    }
    limit = settings.max_request_bytes

    def body_or_too_large(environ: WSGIEnvironment) -> bytes | Answer:
        length = _length(environ)
        if (length or 0) > limit:
            _drain(environ["wsgi.input"], length)
            return bad_request(f"request body too large: the limit is {limit} bytes", 413)
        data: bytes = environ["wsgi.input"].read(length if length is not None else limit + 1)
        if len(data) > limit:
            _drain(environ["wsgi.input"], None)
            return bad_request(f"request body too large: the limit is {limit} bytes", 413)
        return data

    @app.route("POST", "/v1/admit")
    def admit(environ: WSGIEnvironment) -> Reply:
        status, payload = endpoint.answer(environ)
        return Reply(status, payload)

    @app.route("POST", "/v1/mutate")
    def mutate(environ: WSGIEnvironment) -> Reply:
        status, payload = mutating.answer(environ)
        return Reply(status, payload)

    @app.route("POST", "/v1/admitlabel")
    def admitlabel(environ: WSGIEnvironment) -> Reply:
        body = body_or_too_large(environ)
        answer = body if isinstance(body, Answer) else label_guard(body, settings)
        return json_reply(answer.body, answer.status)

    policy_admission = PolicyAdmission(live, settings.policy_validation)

    @app.route("POST", "/v1/admitpolicy")
    def admit_policy(environ: WSGIEnvironment) -> Reply:
        body = body_or_too_large(environ)
        answer = body if isinstance(body, Answer) else policy_admission.handle(body)
        return json_reply(answer.body, answer.status)

    @app.route("GET", "/healthz")
    def healthz(environ: WSGIEnvironment) -> Reply:
        return Reply(200, b"ok\n", "text/plain; charset=utf-8")

    @app.route("GET", "/readyz")
    def readyz(environ: WSGIEnvironment) -> Reply:
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
            if loaded.admission is not None:  # --enforce-admission-policies: Kubernetes' own, enforced
                detail["admissionPolicies"] = list(loaded.admission.names)
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
        return json_reply(detail, 200 if live.ready else 503)

    @app.route("GET", "/metrics")
    def metrics_page(environ: WSGIEnvironment) -> Reply:
        data, content_type = metrics.render(environ.get("HTTP_ACCEPT"))
        return Reply(200, data, content_type)

    return app
