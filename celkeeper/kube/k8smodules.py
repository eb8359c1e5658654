"""The parts of the `kubernetes` package celkeeper uses, imported without the rest of it.

    Configuration, RESTClientObject, OpenApiException, ConfigException = client_parts()
    kube_config()        # kubernetes.config.kube_config: load_kube_config, list_kube_config_contexts
    incluster_config()   # kubernetes.config.incluster_config: load_incluster_config

celkeeper uses the package's configuration (kubeconfig files, exec plugins, the in-cluster service
account with its token refresh) and its HTTP pool (`kubernetes.client.rest`), never its generated API
classes and models. Importing the package the ordinary way runs `kubernetes/__init__.py`, which
imports `kubernetes.client` (its API client, pydantic), `.config` (the kubeconfig loader, with
`requests`, `oauthlib` and `requests_oauthlib` for OIDC providers), `.dynamic`, `.stream`, `.watch`,
`.leaderelection` and `.informer`: ~16 MiB of a process's anonymous memory (12-06, 375 modules), held
for its life by the informer of `serve --source kubernetes` and by every command that talks to a
cluster; with only the parts above, ~2 MiB (kubeconfig) or ~1 MiB (in cluster) beside urllib3.

Here the packages whose `__init__` imports the rest (`kubernetes`, `kubernetes.client`,
`kubernetes.client.models`, `kubernetes.utils`, `kubernetes.config`, `oauthlib.oauth2`,
`requests_oauthlib`) are registered with their `__init__` not run, and only the modules above are
imported. A registered package runs its `__init__` the first time an attribute it does not have yet is
asked for (PEP 562 `__getattr__`): code in the same process that uses a package the ordinary way
(`from kubernetes import client; client.CoreV1Api(...)`), or the kubeconfig loader refreshing an OIDC
token, gets all of it as before. A package imported before is used as it is.

Adapter (celkeeper.kube).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

# the packages whose __init__ would import what celkeeper does not use, parents first
_DEFERRED = (
    "kubernetes",
    "kubernetes.client",
    "kubernetes.client.models",
    "kubernetes.utils",
    "kubernetes.config",
    "oauthlib.oauth2",
    "requests_oauthlib",
)
_lock = threading.RLock()  # a package's __init__ may ask another deferred package for an attribute


def _deferred_package(name: str) -> ModuleType:
    """The package `name` registered in sys.modules with its __init__ not run until an attribute it
    lacks is asked for; the package as it is when it was imported already."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return importlib.import_module(name)
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    state = {"run": False}

    def run_init(attribute: str) -> Any:
        with _lock:
            if state["run"]:  # its __init__ ran (and defined no __getattr__ of its own)
                raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
            state["run"] = True
            del module.__dict__["__getattr__"]
            loader.exec_module(module)  # may define a __getattr__ of its own (lazy exports)
        return getattr(module, attribute)

    module.__dict__["__getattr__"] = run_init
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    return module


class _Later:
    """A callable imported from a deferred package by a module that calls it only in a rare case: the
    real one (and its package) loaded then."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(self.module), self.name)(*args, **kwargs)


def _deferred() -> None:
    with _lock:
        if "kubernetes" not in sys.modules:
            for name in _DEFERRED:
                _deferred_package(name)


def _import(name: str, provisional: dict[str, dict[str, Any]]) -> ModuleType:
    """Import module `name`, the names `provisional` gives set on their (deferred) packages meanwhile:
    what it imports from them (`from kubernetes.client import ApiClient`). Afterwards they are taken
    off: anyone else asking gets the package's own, through its __init__."""
    _deferred()
    with _lock:
        if name in sys.modules:
            return sys.modules[name]
        added: list[tuple[ModuleType, str]] = []
        for package, names in provisional.items():
            module = sys.modules.get(package)
            if module is None or "__getattr__" not in module.__dict__:  # imported whole: it has them
                continue
            for key, value in names.items():
                if key not in module.__dict__:
                    module.__dict__[key] = value
                    added.append((module, key))
        try:
            return importlib.import_module(name)
        finally:
            for module, key in added:
                module.__dict__.pop(key, None)


def client_parts() -> tuple[Any, Any, type[Exception], type[Exception]]:
    """(kubernetes.client.Configuration, kubernetes.client.rest.RESTClientObject,
    kubernetes.client.exceptions.OpenApiException, kubernetes.config.ConfigException)."""
    _deferred()
    configuration = importlib.import_module("kubernetes.client.configuration")
    rest = importlib.import_module("kubernetes.client.rest")
    exceptions = importlib.import_module("kubernetes.client.exceptions")
    config_exception = importlib.import_module("kubernetes.config.config_exception")
    return (
        configuration.Configuration,
        rest.RESTClientObject,
        exceptions.OpenApiException,
        config_exception.ConfigException,
    )


def kube_config() -> ModuleType:
    """kubernetes.config.kube_config (kubeconfig files)."""
    configuration = client_parts()[0]
    return _import(
        "kubernetes.config.kube_config",
        {
            "kubernetes.client": {
                "Configuration": configuration,
                "ApiClient": _Later("kubernetes.client.api_client", "ApiClient"),
            },
            "requests_oauthlib": {"OAuth2Session": _Later("requests_oauthlib", "OAuth2Session")},
        },
    )


def incluster_config() -> ModuleType:
    """kubernetes.config.incluster_config (a pod's service account)."""
    configuration = client_parts()[0]
    return _import(
        "kubernetes.config.incluster_config", {"kubernetes.client": {"Configuration": configuration}}
    )
