"""The cel-go engine: Kubernetes' own CEL (cel-go, k8s.io/apiserver), exactly as Gatekeeper v3.23.1
runs it, as a Go shared library (`go/`, built by setup.py; located by `locate`, loaded by `library`,
driven by `engine`)."""
