"""A template reads synced data only when it declares it (Gatekeeper's requires-sync-data annotation);
a malformed annotation is reported and the template loads without data."""

from __future__ import annotations

from celkeeper.cel.api import Engine
from tests.support.syncdata import (
    ANNOTATION,
    INGRESS,
    NO_OTHER,
    REQUIRES_INGRESS,
    engine_fixture,  # noqa: F401 (the fixture `engine`)
    policies,
    template_yaml,
)


def test_only_a_template_that_declares_data_reads_it(engine: Engine) -> None:
    declared = policies(engine, template_yaml(REQUIRES_INGRESS, NO_OTHER))
    assert declared.templates["k8sreads"].requirements == (frozenset({INGRESS}),)
    assert declared.templates["k8sreads"].errors == ()
    # without the annotation, Gatekeeper's environment: `data` is undeclared
    plain = policies(engine, template_yaml(None, NO_OTHER))
    (error,) = {str(e) for e in plain.templates["k8sreads"].errors if "validation does not compile" in str(e)}
    assert "undeclared reference to 'data'" in error


def test_a_malformed_annotation_is_reported_and_the_template_loads_without_data(engine: Engine) -> None:
    loaded = policies(engine, template_yaml("[[{]]", NO_OTHER))
    template = loaded.templates["k8sreads"]
    assert template.requirements == ()
    texts = [str(e) for e in template.errors]
    assert any(f"annotation {ANNOTATION} is not Gatekeeper's requires-sync-data format" in t for t in texts)
    assert any("undeclared reference to 'data'" in t for t in texts)
