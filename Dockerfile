# celkeeper webhook image. Build: docker build -t celkeeper .
FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml setup.cfg README.md ./
COPY celkeeper ./celkeeper
RUN pip install --no-cache-dir . && rm -rf /root/.cache

# the serving certificate is mounted here (e.g. from a Secret managed by cert-manager)
VOLUME ["/certs"]
EXPOSE 8443
USER 65532:65532
ENTRYPOINT ["celkeeper"]
CMD ["serve", "--source", "kubernetes", "--bind", "0.0.0.0:8443", "--cert", "/certs/tls.crt", "--key", "/certs/tls.key"]
