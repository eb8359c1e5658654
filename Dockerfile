# celkeeper's webhook and audit image: a virtual environment on a Python 3.11 base, with the cel-go engine
# (a Go shared library built by setup.py with cgo), run as a non-root user.
#
#   docker build -t celkeeper/celkeeper:v0.1.0 .          # python:3.11-slim, Go from golang:1.26-bookworm
#   hack/image/build.sh                                    # here: buildah, both made locally (no registry)
#
# BASE must provide `python3` (3.11) with the venv module (ensurepip); both stages use it, so the
# environment's interpreter path is the same at build and at run time, and the engine's library is
# linked against the C library the image runs with.
# GO_IMAGE must hold a Go toolchain (>= the `go` line of celkeeper/native/go/go.mod) in /usr/local/go;
# only that directory is used.
ARG BASE=python:3.11-slim
ARG GO_IMAGE=golang:1.26-bookworm

FROM ${GO_IMAGE} AS go

FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
# a C compiler and the Python headers: cgo builds the cel-go engine, and gunicorn-h1c (the fast-http
# extra: the webhook's request heads read in C) is built from source
RUN set -e; \
    include=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])'); \
    if ! command -v gcc >/dev/null || [ ! -f "$include/Python.h" ]; then \
        apt-get update -q; \
        apt-get install -y -q --no-install-recommends gcc libc6-dev \
            "python$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')-dev"; \
    fi
COPY --from=go /usr/local/go /usr/local/go
# Go modules come from GOPROXY (hack/image/build.sh passes the host's module cache as a file proxy first);
# go.sum pins every one of them.
ARG GOPROXY=https://proxy.golang.org,direct
ENV PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=local CGO_ENABLED=1 GOPROXY=${GOPROXY}
COPY pyproject.toml setup.cfg setup.py README.md /src/
COPY celkeeper /src/celkeeper
# `cacert`: an optional CA bundle for networks that inspect TLS (hack/image/build.sh passes the host's).
# setup.py only warns when it cannot build the cel-go engine: an image without it would silently run the
# slow cel-python engine, so the build checks that the engine is there and fails otherwise.
RUN --mount=type=secret,id=cacert,target=/run/secrets/cacert \
    set -e; \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert; fi; \
    python3 -m venv /opt/celkeeper; \
    /opt/celkeeper/bin/pip install '/src[fast-http]'; \
    /opt/celkeeper/bin/pip uninstall -q -y pip; \
    /opt/celkeeper/bin/python -c 'import celkeeper.cli.main, kubernetes, celpy, re2, gunicorn, gunicorn_h1c'; \
    /opt/celkeeper/bin/python -c 'from celkeeper.cel import engine_available; ok, why = engine_available("cel-go"); assert ok, why'; \
    /opt/celkeeper/bin/celkeeper --help >/dev/null

FROM ${BASE}
COPY --from=build /opt/celkeeper /opt/celkeeper
ENV PATH=/opt/celkeeper/bin:$PATH PYTHONUNBUFFERED=1
# certificates and state go to volumes (emptyDir in the manifests); the root filesystem can be read-only
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/opt/celkeeper/bin/celkeeper"]
CMD ["serve", "--source", "kubernetes", "--cert-dir", "/certs", "--state-dir", "/tmp/celkeeper"]
