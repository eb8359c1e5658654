"""`celkeeper serve`: the admission webhook over HTTPS (Gunicorn), with one informer process.

    celkeeper serve --policy-dir examples --bind 127.0.0.1:8443 --cert tls.crt --key tls.key
    celkeeper serve --source kubernetes [--kubeconfig FILE] --cert tls.crt --key tls.key
    celkeeper serve --source kubernetes --cert-dir /certs     # certificates managed by celkeeper

The informer watches the policy folder (or the cluster's ConstraintTemplates, constraints and
namespaces) and publishes snapshots; each worker loads them within a fraction of a second,
recompiling only templates that changed. In a cluster, the informer also creates each template's
constraint CRD and reports, per pod, what the workers enforce. Routes: POST /v1/admit, POST
/v1/admitlabel (who may carry the ignore label), POST /v1/admitpolicy (templates and constraints checked
when applied), GET /healthz, GET /readyz, GET /metrics. SIGTERM stops gracefully after a drain
(--drain-seconds: every answer closes its connection, so kept-alive clients move elsewhere first),
Ctrl-C without one; SIGHUP replaces the workers one at a time (each successor accepts before its
predecessor stops).

Everything celkeeper writes goes under --state-dir (snapshots, worker statuses, metrics, markers,
heartbeat files): with a read-only root filesystem, make that one folder writable (an emptyDir).

With --cert-dir in a cluster, each pod keeps a CA and a serving certificate in a Secret (made when
missing, renewed well before they expire), injects the CA bundle into celkeeper's webhook
configurations and writes the current pair into --cert-dir before serving (like Gatekeeper's
cert-controller; leaderless). --disable-cert-rotation leaves all of that to someone else (cert-manager):
the server then only reads tls.crt and tls.key from --cert-dir.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from celkeeper.cli.options import add_engine_option, engine_name
from celkeeper.settings import (
    FAILURE_MODES,
    POLICY_VALIDATION,
    Settings,
    parse_failure_mode,
    parse_policy_validation,
)

if TYPE_CHECKING:  # imported where they are used: `celkeeper --help` does not load the server
    from celkeeper.incluster.certrotator import CertConfig
    from celkeeper.informer import KubernetesSource
    from celkeeper.snapshot import StateDir, WorkerBoard
    from celkeeper.webhook.app import WebhookApp

SOURCES = ("folder", "kubernetes")
DEFAULT_NAMESPACE = "celkeeper-system"
DEFAULT_CERT_SECRET = "celkeeper-webhook-server-cert"
DEFAULT_CERT_SERVICE = "celkeeper-webhook-service"
DEFAULT_WEBHOOK_CONFIGURATION = "celkeeper-validating-webhook-configuration"
BOOTSTRAP_TIMEOUT = 120.0  # seconds a pod tries to get its first certificate before it gives up
LOG_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the admission webhook (HTTPS) on a folder of policies or the Kubernetes API",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = parser.add_argument_group("policies")
    src.add_argument(
        "--source", choices=SOURCES, default="folder", help="where policies come from (default folder)"
    )
    src.add_argument(
        "--policy-dir",
        metavar="DIR",
        help="folder of templates and constraints (YAML/JSON, read recursively)",
    )
    src.add_argument(
        "--namespaces",
        metavar="PATH",
        help="Namespace objects (file or folder, YAML/JSON) whose labels namespaceSelector "
        "and the ignore label see; a namespace not listed has no labels",
    )
    src.add_argument(
        "--poll-interval",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="how often the folder is checked for changes (default 0.5)",
    )
    src.add_argument(
        "--max-policy-file-bytes",
        type=int,
        default=2 * 1024 * 1024,
        metavar="N",
        help="a policy file larger than this is not read (its last good version stays; default 2 MiB)",
    )
    add_engine_option(src)
    kube = parser.add_argument_group("kubernetes (with --source kubernetes)")
    kube.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig to use (default: the pod's service account, in-cluster)",
    )
    kube.add_argument(
        "--pod-name",
        metavar="NAME",
        default=os.environ.get("POD_NAME") or socket.gethostname(),
        help="this pod's name in per-pod status (default: $POD_NAME, else the host name)",
    )
    kube.add_argument(
        "--pod-namespace",
        metavar="NS",
        default=os.environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE,
        help=f"where per-pod status objects go (default: $POD_NAMESPACE, else {DEFAULT_NAMESPACE})",
    )
    kube.add_argument(
        "--expected-pods",
        type=int,
        default=1,
        metavar="N",
        help="pods that must have loaded a constraint before it reports enforced (default 1)",
    )
    kube.add_argument(
        "--default-create-vap-for-templates",
        action="store_true",
        help="generate a ValidatingAdmissionPolicy for every template without generateVAP "
        "(default: only templates with generateVAP: true)",
    )
    kube.add_argument(
        "--default-create-vap-binding-for-constraints",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="bind the constraints of generated policies that are not scoped to "
        "vap.k8s.io, with their enforcement action (default: yes, as Gatekeeper)",
    )
    kube.add_argument(
        "--default-wait-for-vapb-generation",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="wait this long after a constraint CRD is established before binding its "
        "constraints (default 30, Gatekeeper's: the API server finds new kinds through a "
        "discovery cache reset every 30 s)",
    )
    pol = parser.add_argument_group("admission")
    pol.add_argument(
        "--failure-mode",
        choices=FAILURE_MODES,
        default="allow",
        help="answer when evaluation fails internally (default allow, like Gatekeeper)",
    )
    pol.add_argument(
        "--exempt-namespace",
        metavar="NS",
        action="append",
        default=[],
        help="never check requests in this namespace; it may carry the ignore label "
        "(repeatable; `prefix*` allowed)",
    )
    pol.add_argument(
        "--ignore-label-namespace",
        metavar="NS",
        action="append",
        default=[],
        help="a namespace where the admission.celkeeper.io/ignore label is honoured (and may be "
        "set: /v1/admitlabel refuses it on any other); repeatable, `prefix*` allowed",
    )
    pol.add_argument(
        "--exempt-namespace-deletes",
        action="store_true",
        help="let DELETE of an exempt or ignore-labelled Namespace go unchecked too "
        "(default: deleting a namespace is always checked)",
    )
    pol.add_argument(
        "--max-request-bytes", type=int, metavar="N", help="largest request body accepted (larger: 413)"
    )
    pol.add_argument(
        "--mutation-annotations",
        action="store_true",
        help="POST /v1/mutate adds Gatekeeper's mutation annotations (gatekeeper.sh/mutation-id, "
        "gatekeeper.sh/mutations) to the objects it mutates, as Gatekeeper's flag does",
    )
    pol.add_argument(
        "--enforce-admission-policies",
        action="store_true",
        help="enforce the ValidatingAdmissionPolicies and MutatingAdmissionPolicies among the policies (with "
        "their bindings and parameters) with Kubernetes' own code: VAP verdicts at POST /v1/admit, MAP "
        "patches at POST /v1/mutate; for API servers that do not enforce them",
    )
    pol.add_argument(
        "--self-username",
        metavar="USER",
        help="POST /v1/mutate never mutates this user's requests, as Gatekeeper's mutation webhook leaves "
        "its own service account's alone (default in a cluster without --kubeconfig: the pod's service "
        "account, system:serviceaccount:NAMESPACE:NAME, read from its token; else nobody)",
    )
    pol.add_argument(
        "--eval-deadline",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="time the policies may take to decide one request (default 2; keep it below the "
        "webhook's timeoutSeconds): constraints not evaluated in time fail under their "
        "failurePolicy; an evaluation that still runs is stopped and answered by "
        "--failure-mode (0: no deadline)",
    )
    pol.add_argument(
        "--log-denies",
        nargs="?",
        const="line",
        choices=("line", "explain"),
        default=None,
        metavar="line|explain",
        help="log every denied request (one line; =explain: also why, constraint by constraint, "
        "as `celkeeper explain` shows it)",
    )
    pol.add_argument(
        "--export-decisions",
        metavar="stdout|FILE",
        help="write every violation found at admission (deny, warn, dryrun; and each request answered "
        "by --failure-mode) as one JSON line to stdout or appended to FILE (docs/results.md: the "
        "schema); never delays a review: lines that cannot be written in time are dropped and counted",
    )
    pol.add_argument(
        "--export-allowed",
        action="store_true",
        help="with --export-decisions, also a line per request allowed without any violation",
    )
    pol.add_argument(
        "--policy-validation",
        choices=POLICY_VALIDATION,
        default="deny",
        help="templates and constraints that do not compile or do not fit their schema, at "
        "apply time (POST /v1/admitpolicy): deny (default) or warn",
    )
    srv = parser.add_argument_group("server")
    srv.add_argument(
        "--bind",
        metavar="HOST:PORT",
        action="append",
        help="listen address (repeatable; default 0.0.0.0:8443)",
    )
    srv.add_argument(
        "--cert", metavar="FILE", help="serving certificate (PEM); re-read when it changes (or --cert-dir)"
    )
    srv.add_argument("--key", metavar="FILE", help="its private key (PEM)")
    certs = parser.add_argument_group("certificates managed in the cluster (--cert-dir, --source kubernetes)")
    certs.add_argument(
        "--cert-dir",
        metavar="DIR",
        type=Path,
        help="where tls.crt and tls.key are: written by celkeeper from its certificate "
        "Secret (default), or provided (--disable-cert-rotation)",
    )
    certs.add_argument(
        "--disable-cert-rotation",
        action="store_true",
        help="do not make, rotate or inject certificates (e.g. cert-manager does)",
    )
    certs.add_argument(
        "--cert-secret",
        metavar="NAME",
        default=DEFAULT_CERT_SECRET,
        help=f"the Secret in --pod-namespace holding the CA and certificate (default {DEFAULT_CERT_SECRET})",
    )
    certs.add_argument(
        "--cert-service",
        metavar="NAME",
        default=DEFAULT_CERT_SERVICE,
        help=f"the webhook's Service: the certificate names NAME.NAMESPACE.svc "
        f"(default {DEFAULT_CERT_SERVICE})",
    )
    certs.add_argument(
        "--webhook-configuration",
        metavar="NAME",
        action="append",
        help="ValidatingWebhookConfiguration whose caBundle celkeeper keeps current "
        f"(repeatable; default {DEFAULT_WEBHOOK_CONFIGURATION})",
    )
    certs.add_argument(
        "--mutating-webhook-configuration",
        metavar="NAME",
        action="append",
        default=[],
        help="MutatingWebhookConfiguration (POST /v1/mutate) whose caBundle celkeeper keeps current "
        "(repeatable; default none)",
    )
    certs.add_argument(
        "--ca-overlap",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a new CA is trusted this long before it signs the serving certificate (default 60)",
    )
    srv.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes (default 1): each holds its own compiled policies and Go runtime",
    )
    srv.add_argument(
        "--threads",
        type=int,
        default=2,
        help="event loops per worker process, each on a thread of its own (default 2): the policies' "
        "evaluation in Go runs on as many cores at once",
    )
    srv.add_argument(
        "--timeout", type=int, default=30, help="seconds before a stuck worker is replaced (default 30)"
    )
    srv.add_argument(
        "--graceful-timeout",
        type=int,
        default=10,
        help="seconds workers get to finish on stop/restart (default 10)",
    )
    srv.add_argument(
        "--drain-seconds",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="on SIGTERM, keep serving this long first, every answer closing its connection, so "
        "that clients with kept-alive connections move elsewhere before the server stops "
        "(default 5; 0: none; SIGINT skips it). Stopping takes up to this plus "
        "--graceful-timeout",
    )
    srv.add_argument(
        "--keepalive", type=int, default=60, help="seconds an idle connection is kept open (default 60)"
    )
    srv.add_argument(
        "--handshake-timeout",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="a new connection must complete its TLS handshake within this (default 5)",
    )
    srv.add_argument(
        "--request-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="a request must arrive whole within this of its first byte, and a new connection "
        "send its first request within this of its handshake (default 10)",
    )
    srv.add_argument(
        "--max-requests",
        type=int,
        default=50_000,
        metavar="N",
        help="replace a worker after N requests plus a random 0-10%% more, so that workers do "
        "not restart together (bounds memory growth; default 50000; 0: never)",
    )
    srv.add_argument(
        "--state-dir",
        metavar="DIR",
        type=Path,
        help="the one folder celkeeper writes to: snapshots, worker statuses, metrics, markers "
        "(default: a new temporary folder; with a read-only root, an emptyDir volume)",
    )
    srv.add_argument("--access-log", action="store_true", help="log every request")
    srv.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    parser.set_defaults(func=run)


def _settings(args: argparse.Namespace) -> Settings:
    settings = Settings(
        engine=engine_name(args),
        failure_mode=parse_failure_mode(args.failure_mode),  # argparse's choices: these only narrow
        exempt_namespaces=frozenset(args.exempt_namespace),
        ignore_label_namespaces=frozenset(args.ignore_label_namespace),
        exempt_namespace_deletes=args.exempt_namespace_deletes,
        eval_deadline=args.eval_deadline,
        mutation_annotations=args.mutation_annotations,
        self_username=_self_username(args),
        enforce_admission_policies=args.enforce_admission_policies,
        policy_validation=parse_policy_validation(args.policy_validation),
    )
    if args.max_request_bytes is not None:
        settings = settings.with_(max_request_bytes=args.max_request_bytes)
    return settings


def run(args: argparse.Namespace) -> int:
    from celkeeper.errors import CelkeeperError
    from celkeeper.informer import FolderSource, run_informer
    from celkeeper.snapshot import WorkerBoard
    from celkeeper.tls import ServerTLS
    from celkeeper.webhook.server import ServerOptions, serve

    if args.source == "folder" and not args.policy_dir:
        raise CelkeeperError("--policy-dir DIR is needed with --source folder")
    if args.source == "kubernetes" and (args.policy_dir or args.namespaces):
        raise CelkeeperError("--policy-dir and --namespaces are for --source folder; the cluster has both")
    if args.workers < 1 or args.threads < 1:
        raise CelkeeperError("--workers and --threads must be at least 1")
    if args.handshake_timeout <= 0 or args.request_timeout <= 0:
        raise CelkeeperError("--handshake-timeout and --request-timeout must be positive")
    if args.expected_pods < 1:
        raise CelkeeperError("--expected-pods must be at least 1")
    if args.default_wait_for_vapb_generation < 0:
        raise CelkeeperError("--default-wait-for-vapb-generation must not be negative")
    if args.drain_seconds < 0:
        raise CelkeeperError("--drain-seconds must be 0 or more")
    if args.eval_deadline < 0:
        raise CelkeeperError("--eval-deadline cannot be negative")
    if args.max_policy_file_bytes < 1:
        raise CelkeeperError("--max-policy-file-bytes must be at least 1")
    if args.export_allowed and not args.export_decisions:
        raise CelkeeperError("--export-allowed needs --export-decisions")
    if args.export_decisions and args.export_decisions != "stdout":
        _check_export_file(Path(args.export_decisions))
    settings = _settings(args)
    cert_file, key_file = _certificate_files(args)
    certificates = _certificate_config(args)
    policy_dir = args.policy_dir
    namespaces = args.namespaces
    if args.source == "folder":
        FolderSource(policy_dir, namespaces=namespaces).check()
    else:
        _check_kubernetes_config(args.kubeconfig, args.pod_name, args.pod_namespace)

    logging.basicConfig(
        level=args.log_level.upper(), format=LOG_FORMAT, stream=sys.stderr, datefmt="%Y-%m-%d %H:%M:%S %z"
    )
    if certificates is not None:
        _in_child(_bootstrap_certificates, args.kubeconfig, certificates)
    tls = ServerTLS(cert_file, key_file)  # fails now, with one line, if the pair is unusable

    temporary = args.state_dir is None
    state = _state_dir(args.state_dir)
    root = state.root
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(state.metrics)  # before any worker imports prometheus_client
    # anything else a library writes to a temporary file (the kubernetes client's certificate data,
    # for one) goes to the state folder too: with a read-only root there may be no writable /tmp
    os.environ["TMPDIR"] = str(state.tmp)
    tempfile.tempdir = str(state.tmp)

    master = os.getpid()
    poll = args.poll_interval

    def informer() -> int:
        if args.source == "kubernetes":
            return run_informer(
                lambda: _kubernetes_source(args, state, certificates), state, settings, master, interval=1.0
            )
        return run_informer(
            lambda: FolderSource(
                policy_dir,
                poll_interval=poll,
                namespaces=namespaces,
                max_file_bytes=args.max_policy_file_bytes,
            ),
            state,
            settings,
            master,
            interval=poll,
        )

    def app_factory(heartbeat: Callable[[], None]) -> WebhookApp:
        from celkeeper.webhook.app import WebhookConfig, create_app

        config = WebhookConfig(
            settings=settings,
            state=state,
            log_denies=args.log_denies is not None,
            explain_denies=args.log_denies == "explain",
            freeze_gc=True,
            export_decisions=args.export_decisions,
            export_allowed=args.export_allowed,
            pod_name=args.pod_name,
        )
        return create_app(config, heartbeat=heartbeat)

    options = ServerOptions(
        binds=tuple(args.bind or ["0.0.0.0:8443"]),
        workers=args.workers,
        threads=args.threads,
        timeout=args.timeout,
        graceful_timeout=args.graceful_timeout,
        drain_seconds=args.drain_seconds,
        keepalive=args.keepalive,
        handshake_timeout=args.handshake_timeout,
        request_timeout=args.request_timeout,
        max_body=settings.max_request_bytes,
        max_requests=args.max_requests,
        access_log=args.access_log,
        log_level=args.log_level,
        control_dir=state.server,
        worker_tmp_dir=_heartbeat_dir(state),
        admission_policies=settings.enforce_admission_policies,
    )
    board = WorkerBoard(state.workers)
    try:
        serve(
            options,
            tls,
            app_factory,
            informer=informer,
            on_worker_gone=board.remove,
            worker_ready=lambda pid: _takes_over(board, pid),
        )
    finally:
        if temporary and os.getpid() == master:
            shutil.rmtree(root, ignore_errors=True)
    return 0


SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def _self_username(args: argparse.Namespace) -> str:
    """The user whose requests /v1/mutate leaves alone: --self-username, else in a cluster (the cluster
    source without --kubeconfig) the pod's service account as its token names it, else nobody."""
    if args.self_username is not None:
        return str(args.self_username)
    if args.source != "kubernetes" or args.kubeconfig or not os.path.exists(SERVICE_ACCOUNT_TOKEN):
        return ""
    with open(SERVICE_ACCOUNT_TOKEN, encoding="ascii", errors="replace") as token:
        return service_account_username(token.read())


def service_account_username(token: str) -> str:
    """The username a service account token authenticates as (its `sub` claim,
    system:serviceaccount:NAMESPACE:NAME), or "" when the token does not name a service account. The
    token is not verified: it is the pod's own, mounted by the kubelet, read only for its name."""
    import base64
    import binascii
    import json

    parts = token.strip().split(".")
    if len(parts) != 3:
        return ""
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return ""
    subject = claims.get("sub") if isinstance(claims, dict) else None
    if isinstance(subject, str) and subject.startswith("system:serviceaccount:") and subject.count(":") == 3:
        return subject
    return ""


def _check_kubernetes_config(kubeconfig: str | None, pod_name: str, pod_namespace: str) -> None:
    """Fail at start-up, with one line, when the cluster source cannot work (no network used)."""
    from celkeeper.crds import names
    from celkeeper.errors import CelkeeperError

    if kubeconfig:
        if not os.path.isfile(kubeconfig):
            raise CelkeeperError(f"kubeconfig {kubeconfig} does not exist")
        if not os.access(kubeconfig, os.R_OK):
            raise CelkeeperError(f"kubeconfig {kubeconfig} is not readable")
    elif not os.environ.get("KUBERNETES_SERVICE_HOST") or not os.path.exists(SERVICE_ACCOUNT_TOKEN):
        raise CelkeeperError(
            "not running in a cluster (no KUBERNETES_SERVICE_HOST or service account token): "
            "give --kubeconfig FILE"
        )
    if not names.is_dns1123_subdomain(pod_name) or len(pod_name) > 63:
        raise CelkeeperError(
            f"pod name {pod_name!r} cannot name status objects: use lower-case letters, digits, '-' and "
            "'.' (at most 63 characters), e.g. --pod-name or POD_NAME"
        )
    if not names.is_dns1035_label(pod_namespace) and not names.is_dns1123_subdomain(pod_namespace):
        raise CelkeeperError(f"{pod_namespace!r} is not a valid namespace name (--pod-namespace)")


def _check_export_file(path: Path) -> None:
    """The decision export's file can be appended to (each worker opens it after the fork)."""
    from celkeeper.errors import CelkeeperError

    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
    except OSError as err:
        raise CelkeeperError(
            f"--export-decisions {path}: cannot append to it ({err.strerror or err})"
        ) from err
    os.close(fd)


def _state_dir(given: Path | None) -> StateDir:
    """The state folder, reset; a one-line error naming what is needed when it cannot be written."""
    from celkeeper.errors import CelkeeperError
    from celkeeper.snapshot import StateDir

    if given is None:
        try:
            given = Path(tempfile.mkdtemp(prefix="celkeeper-"))
        except OSError as err:
            raise CelkeeperError(
                f"no writable temporary folder for the server's state ({err.strerror or err}): give "
                "--state-dir DIR, a writable folder (with a read-only root filesystem: an emptyDir volume)"
            ) from err
    state = StateDir(given)
    try:
        state.reset()
        probe = state.root / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise CelkeeperError(
            f"the state folder {given} is not writable ({err.strerror or err}): celkeeper writes its "
            "snapshots, worker statuses and metrics there; give --state-dir a writable folder (with a "
            "read-only root filesystem: an emptyDir volume)"
        ) from err
    return state


def _heartbeat_dir(state: StateDir) -> str:
    """Where Gunicorn's workers keep their heartbeat files: /dev/shm (memory) when writable, else the
    state folder (never the root filesystem's /tmp)."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else str(state.tmp)


def _takes_over(board: WorkerBoard, pid: int) -> bool:
    """A successor takes over from a worker once it enforces what the others do: it has loaded a
    complete snapshot, or no worker has."""
    statuses = board.read_all()
    mine = next((s for s in statuses if s.pid == pid), None)
    if mine is None:
        return False
    return mine.ready or not any(s.ready for s in statuses if s.pid != pid)


def _certificate_files(args: argparse.Namespace) -> tuple[str, str]:
    from celkeeper.errors import CelkeeperError

    if args.cert_dir is not None:
        if args.cert or args.key:
            raise CelkeeperError("give either --cert-dir or --cert and --key, not both")
        return str(args.cert_dir / "tls.crt"), str(args.cert_dir / "tls.key")
    if not args.cert or not args.key:
        raise CelkeeperError("the serving certificate is needed: --cert FILE --key FILE, or --cert-dir DIR")
    return args.cert, args.key


def _certificate_config(args: argparse.Namespace) -> CertConfig | None:
    """The certificate management of --cert-dir, None when celkeeper does not manage certificates."""
    from celkeeper.errors import CelkeeperError

    if args.cert_dir is None or args.disable_cert_rotation:
        return None
    if args.source != "kubernetes":
        raise CelkeeperError(
            "celkeeper manages certificates (--cert-dir) only with --source kubernetes; "
            "give --disable-cert-rotation to serve the files in --cert-dir as they are"
        )
    if args.ca_overlap < 0:
        raise CelkeeperError("--ca-overlap must not be negative")
    import datetime

    from celkeeper.incluster.certrotator import CertConfig
    from celkeeper.pki import RotationPolicy

    service = f"{args.cert_service}.{args.pod_namespace}"
    policy = RotationPolicy(
        dns_names=(f"{service}.svc", f"{service}.svc.cluster.local"),
        ca_overlap=datetime.timedelta(seconds=args.ca_overlap),
    )
    return CertConfig(
        namespace=args.pod_namespace,
        secret_name=args.cert_secret,
        webhook_configurations=tuple(args.webhook_configuration or [DEFAULT_WEBHOOK_CONFIGURATION]),
        cert_dir=args.cert_dir,
        policy=policy,
        mutating_webhook_configurations=tuple(args.mutating_webhook_configuration),
    )


def _in_child(work: Callable[..., None], *args: Any) -> None:
    """Run `work(*args)` in a child process and wait for it; its CelkeeperError is raised here, with its
    message. The master stays as small as it is: what the work imports (the Kubernetes adapter and its
    client, for the certificate bootstrap) is not carried by the master and every process it forks."""
    from celkeeper.errors import CelkeeperError

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: do the work, say what went wrong, leave
        os.close(read)
        code = 0
        try:
            work(*args)
        except CelkeeperError as err:
            os.write(write, str(err).encode())
            code = 1
        except BaseException as err:  # a bug: its traceback on stderr, one line for the master
            logging.getLogger("celkeeper.serve").exception("failed: %s", err)
            os.write(write, f"internal error: {err}".encode())
            code = 1
        finally:
            logging.shutdown()
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise CelkeeperError(message or f"the child process doing {work.__name__} exited with {status}")


def _bootstrap_certificates(
    kubeconfig: str | None, config: CertConfig, timeout: float = BOOTSTRAP_TIMEOUT
) -> None:
    """Before serving: the certificate Secret current, the CA bundle injected, the files written.
    Retried while the API cannot be reached or refuses (e.g. RBAC not applied yet), then one line."""
    import time

    from celkeeper.errors import CelkeeperError
    from celkeeper.incluster.certrotator import CertRotator
    from celkeeper.kube import ApiError, KubeClient

    log = logging.getLogger("celkeeper.certs")
    deadline = time.monotonic() + timeout
    delay = 0.5
    client = KubeClient.connect(kubeconfig)
    try:
        rotator = CertRotator(client, config)
        while True:
            try:
                rotator.reconcile()
                return
            except ApiError as err:
                if time.monotonic() + delay > deadline:
                    raise CelkeeperError(
                        f"cannot set up the webhook certificate in {config.namespace}/"
                        f"{config.secret_name}: {err}"
                    ) from err
                log.warning("setting up the webhook certificate failed, retrying in %.1fs: %s", delay, err)
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
    finally:
        client.close()


def _kubernetes_source(
    args: argparse.Namespace, state: StateDir, certificates: CertConfig | None = None
) -> KubernetesSource:
    from celkeeper.incluster.vapwriter import VapSyncOptions
    from celkeeper.informer import KubernetesOptions, KubernetesSource
    from celkeeper.vap import Scope
    from celkeeper.vap.plan import VapOptions

    options = KubernetesOptions(
        state=state,
        pod_name=args.pod_name,
        pod_namespace=args.pod_namespace,
        expected_pods=args.expected_pods,
        kubeconfig=args.kubeconfig,
        vap=VapOptions(
            default_generate_vap=args.default_create_vap_for_templates,
            default_generate_binding=args.default_create_vap_binding_for_constraints,
            # Gatekeeper's policies exempt what its --exempt-namespace flags exempt (sorted, as it does)
            scope=Scope(exempted_namespaces=tuple(sorted(set(args.exempt_namespace)))),
        ),
        vap_sync=VapSyncOptions(wait_for_binding=args.default_wait_for_vapb_generation),
        certificates=certificates,
        admission_policies=args.enforce_admission_policies,
    )
    return KubernetesSource(options)
