"""JSON as deep as the API server allows (celkeeper.kube.jsondeep)."""

from __future__ import annotations

import json

import pytest

from celkeeper.kube.jsondeep import loads_deep


def test_json_as_deep_as_the_api_server_allows() -> None:
    text = '{"a":' * 10_000 + "1" + "}" * 10_000
    value = loads_deep(text.encode())
    levels = 0
    while isinstance(value, dict):
        value, levels = value["a"], levels + 1
    assert (levels, value) == (10_000, 1)
    with pytest.raises(ValueError):
        loads_deep(b"{not json")
    assert json.loads("[1]") == loads_deep("[1]")
