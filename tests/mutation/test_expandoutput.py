"""celkeeper.mutation.expand_output: gator expand's sorting and encodings, made by the native library
(compared with gator itself on generated inputs in tests/e2e/gator/test_expand.py)."""

from __future__ import annotations

import json

import pytest
import yaml

from celkeeper.mutation import expand_output


def _obj(name: str, kind: str = "Pod", api_version: str = "v1", **extra: object) -> dict[str, object]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, **extra}


def test_sorted_descending_by_name_api_version_and_kind() -> None:
    objects = [_obj("a"), _obj("b"), _obj("a", "Job", "batch/v1")]
    text = expand_output(objects, "yaml")
    names = [(o["metadata"]["name"], o["kind"]) for o in yaml.safe_load_all(text)]
    assert names == [("b", "Pod"), ("a", "Pod"), ("a", "Job")]
    assert text.count("---\n") == 2 and not text.endswith("---\n")


def test_json_is_indented_with_four_spaces_and_yaml_keys_are_sorted() -> None:
    obj = _obj("web", spec={"z": 1, "a": [1, 2]})
    as_json = expand_output([obj], "json")
    assert json.loads(as_json) == obj
    assert as_json.startswith('{\n    "apiVersion": "v1",')
    assert expand_output([obj], "yaml").splitlines()[:3] == ["apiVersion: v1", "kind: Pod", "metadata:"]


def test_no_resultants_and_bad_input() -> None:
    assert expand_output([], "yaml") == ""
    with pytest.raises(ValueError, match="unrecognized value for format flag: toml"):
        expand_output([_obj("a")], "toml")
    with pytest.raises(ValueError, match="resultant 1"):
        expand_output([{"metadata": {"name": "no-kind"}}], "yaml")
