"""The `kubernetes` package's configuration and HTTP pool without its API modules and models
(celkeeper.kube.k8smodules), and the whole package for code that asks for it in the same process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.support.serve import ROOT


def _fresh(code: str) -> dict[str, object]:
    """What `code` (which prints one JSON document) finds in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=True,
    )
    found: dict[str, object] = json.loads(done.stdout)
    return found


HEAVY = (
    "pydantic",
    "kubernetes.client.api_client",
    "kubernetes.client.api",
    "kubernetes.client.models.v1_pod",
    "kubernetes.watch",
    "kubernetes.dynamic",
    "kubernetes.stream",
    "requests",
    "oauthlib.oauth2.rfc6749",
)


@pytest.mark.parametrize("loader", ["kube_config", "incluster_config"])
def test_the_client_loads_without_the_api_modules_models_pydantic_and_oauth(loader: str) -> None:
    found = _fresh(
        f"""
        import json, sys
        from celkeeper.kube import k8smodules
        parts = k8smodules.client_parts()
        config = k8smodules.{loader}()
        print(json.dumps({{
            "loaded": sorted(m for m in {HEAVY!r} if m in sys.modules),
            "names": [part.__name__ for part in parts],
            "config": config.__name__,
        }}))
        """
    )
    assert found == {
        "loaded": [],
        "names": ["Configuration", "RESTClientObject", "OpenApiException", "ConfigException"],
        "config": f"kubernetes.config.{loader}",
    }


def test_the_package_is_whole_for_code_that_uses_it_afterwards() -> None:
    found = _fresh(
        """
        import json
        from celkeeper.kube import k8smodules
        configuration = k8smodules.client_parts()[0]
        loader = k8smodules.kube_config()
        import kubernetes
        from kubernetes import client, config
        from kubernetes.client import ApiClient
        from requests_oauthlib import OAuth2Session
        api = ApiClient(client.Configuration())
        print(json.dumps({
            "api": type(client.CoreV1Api(api)).__name__,
            "class": isinstance(ApiClient, type) and isinstance(api, client.ApiClient),
            "configuration": client.Configuration is configuration,
            "model": client.V1ObjectMeta(name="x").name,
            "watch": kubernetes.watch.Watch.__name__,
            "config": config.load_kube_config is loader.load_kube_config,
            "oauth": isinstance(OAuth2Session, type),
            "oidc": type(loader.ApiClient(client.Configuration())).__name__,
        }))
        """
    )
    assert found == {
        "api": "CoreV1Api",
        "class": True,
        "configuration": True,
        "model": "x",
        "watch": "Watch",
        "config": True,
        "oauth": True,
        "oidc": "ApiClient",
    }


def test_a_package_imported_before_is_used_as_it_is() -> None:
    found = _fresh(
        """
        import json
        import kubernetes
        from kubernetes import client
        from celkeeper.kube import k8smodules
        configuration = k8smodules.client_parts()[0]
        loader = k8smodules.kube_config()
        same = configuration is client.Configuration and loader.ApiClient is client.ApiClient
        print(json.dumps({"same": same}))
        """
    )
    assert found == {"same": True}
