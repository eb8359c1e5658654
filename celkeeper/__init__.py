"""celkeeper: a Kubernetes admission policy engine for Gatekeeper-style ConstraintTemplates in CEL."""

__version__ = "0.1.0"
