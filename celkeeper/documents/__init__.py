"""YAML 1.2 / JSON documents as plain data, with the position of every field.

The bottom layer: no file reading (callers pass text and a display name), no celkeeper imports but
errors. A `Document` is one YAML/JSON document of a file: its plain data (dict, list, str, int,
float, bool, None; timestamps stay strings, as Kubernetes reads them), its file name, its 1-based
index in the file and the position (line:col) of every field path, so that every error can say
`file:line:col: document N: spec.targets[0].code[0]: message`.

Field paths are written as Kubernetes writes them: `spec.targets[0].code[0].source`, with map keys
that are not plain identifiers in brackets (`metadata.labels[app.kubernetes.io/name]`).

YAML 1.2 (ruamel.yaml's types; libyaml composes what it reads as ruamel.yaml does, ruamel.yaml the
rest): `yes`/`no`/`on`/`off` are strings, `012` is 12; duplicate keys are errors.
"""

from celkeeper.documents.document import (
    Document,
    Span,
    field_path,
    index_path,
    key_path,
    parent_path,
)
from celkeeper.documents.parse import ParsedText, parse_documents, parse_sources

__all__ = [
    "Document",
    "ParsedText",
    "Span",
    "field_path",
    "index_path",
    "key_path",
    "parent_path",
    "parse_documents",
    "parse_sources",
]
