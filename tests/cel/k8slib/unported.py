"""Kubernetes library cases the Python port (celkeeper.cel.k8slib, used by the cel-python engine)
answers otherwise than what Gatekeeper v3.23.1 runs (k8s.io/apiserver and k8s.io/apimachinery v0.36.2,
built with Go 1.26), as found when the goldens are regenerated: strict expected failures on cel-python
until the port follows (the cel-go engine runs Kubernetes' own code). None today: the 53 answers that
changed between Kubernetes 1.34 and v0.36.2 are ported (format's validation messages from
k8s.io/apimachinery v0.36.2, net/url's host parsing from Go 1.26). A new case goes here as
`expression: reason`.
"""

from __future__ import annotations

UNPORTED: dict[str, str] = {}


def unported(expr: str) -> str | None:
    """Why the Python port answers `expr` differently from Gatekeeper's Kubernetes, or None."""
    return UNPORTED.get(expr)
