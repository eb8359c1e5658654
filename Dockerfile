# celkeeper's webhook image: a virtual environment on a Python 3.11 base, run as a non-root user.
#
#   docker build -t celkeeper/celkeeper:v0.1.0 .                      # on python:3.11-slim
#   hack/image/build.sh                                                # here: buildah, a base made locally
#
# BASE must provide `python3` (3.11) with the venv module (ensurepip); both stages use it, so the
# environment's interpreter path is the same at build and at run time.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
# a C compiler and the Python headers: gunicorn-h1c is built from source (no wheel on PyPI)
RUN set -e; \
    include=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])'); \
    if ! command -v gcc >/dev/null || [ ! -f "$include/Python.h" ]; then \
        apt-get update -q; \
        apt-get install -y -q --no-install-recommends gcc libc6-dev \
            "python$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')-dev"; \
    fi
COPY pyproject.toml setup.cfg README.md /src/
COPY celkeeper /src/celkeeper
# `cacert`: an optional CA bundle for networks that inspect TLS (hack/image/build.sh passes the host's)
RUN --mount=type=secret,id=cacert,target=/run/secrets/cacert \
    set -e; \
    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert; fi; \
    python3 -m venv /opt/celkeeper; \
    /opt/celkeeper/bin/pip install /src; \
    /opt/celkeeper/bin/pip uninstall -q -y pip; \
    /opt/celkeeper/bin/python -c 'import celkeeper.cli.main, kubernetes, cel_expr_python, celpy, re2, gunicorn'; \
    /opt/celkeeper/bin/celkeeper --help >/dev/null

FROM ${BASE}
COPY --from=build /opt/celkeeper /opt/celkeeper
ENV PATH=/opt/celkeeper/bin:$PATH PYTHONUNBUFFERED=1
# certificates and state go to volumes (emptyDir in the manifests); the root filesystem can be read-only
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/opt/celkeeper/bin/celkeeper"]
CMD ["serve", "--source", "kubernetes", "--cert-dir", "/certs", "--state-dir", "/tmp/celkeeper"]
