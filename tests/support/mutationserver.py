"""celkeeper's mutation (celkeeper.review.mutate) behind a small HTTPS server, for tests that register it
as a mutating webhook on a real API server (the differential against Gatekeeper's webhook): its mutators
and their options (Gatekeeper's Config exclusions, the annotations flag) are swapped between rounds
without a restart. `celkeeper serve`'s /v1/mutate answers with the same review.mutate
(tests/webhook/test_admission_mutate_server.py); the differential does not yet run through it.

    with MutationServer(namespaces=lambda name: ...) as server:     # real TLS, its own CA
        server.mutators = build_mutator_set(documents, options)     # swapped between requests
        ... register server.url with server.ca_pem ...

Each POST is an AdmissionReview answered with `admission_review_for_response(mutate(...))`; the
Namespace of a namespaced request comes from `namespaces` (the test reads the API server, as Gatekeeper's
webhook does). Anything else is a 400 with the reason: the API server, failing closed, then refuses the
request, so a broken server shows as a difference, not as a silent allow.
"""

from __future__ import annotations

import json
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from celkeeper.errors import CelkeeperError
from celkeeper.mutation import MutatorSet
from celkeeper.review.mutate import admission_review_response, mutate
from tests.support.pki import CertificateAuthority

NamespaceReader = Callable[[str], Mapping[str, Any] | None]


class MutationServer:
    def __init__(self, namespaces: NamespaceReader) -> None:
        self.namespaces = namespaces
        self.mutators = MutatorSet()
        self.requests = 0
        ca = CertificateAuthority("celkeeper-mutation-test-ca")
        self.ca_pem = ca.cert_pem
        self._dir = tempfile.TemporaryDirectory(prefix="celkeeper-mutation-")
        cert, key = ca.serving_cert(["127.0.0.1", "localhost"]).write(Path(self._dir.name), "tls")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(cert), str(key))
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="mutation-server", daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._httpd.server_address[1]}/v1/mutate"

    def __enter__(self) -> MutationServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)
        self._dir.cleanup()

    def answer(self, body: bytes) -> tuple[int, bytes]:
        self.requests += 1
        try:
            review = json.loads(body)
            mutation = mutate(review, self.mutators, self.namespaces)
        except (ValueError, CelkeeperError) as err:
            return 400, str(err).encode()
        return 200, json.dumps(admission_review_response(mutation)).encode()


def _handler(server: MutationServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            status, body = server.answer(self.rfile.read(length))
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if status == 200 else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            del format, args

    return Handler
