"""Gatekeeper's mutators, run by Gatekeeper's own code in celkeeper's native library (see
`celkeeper.mutation.mutators`).

Which documents are mutators (kinds.py) is imported with the package; the mutation System (mutators.py,
expandoutput.py, over the native library's wrappers) when one of its names is first used: a policy set
without mutators does not import it (`test -f` over Gatekeeper's templates and constraints)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from celkeeper.mutation.kinds import GROUP, KINDS, is_mutator

if TYPE_CHECKING:
    from celkeeper.mutation.expandoutput import expand_output
    from celkeeper.mutation.mutators import (
        MutatedObject,
        MutationOptions,
        MutationRequest,
        MutationResult,
        MutationUnavailable,
        Mutator,
        MutatorError,
        MutatorSet,
        build_mutator_set,
        check_mutator,
    )

#: the names imported when first used, by the module of the package that defines them
_LAZY = {
    "MutatedObject": "mutators",
    "MutationOptions": "mutators",
    "MutationRequest": "mutators",
    "MutationResult": "mutators",
    "MutationUnavailable": "mutators",
    "Mutator": "mutators",
    "MutatorError": "mutators",
    "MutatorSet": "mutators",
    "build_mutator_set": "mutators",
    "check_mutator": "mutators",
    "expand_output": "expandoutput",
}

__all__ = [
    "GROUP",
    "KINDS",
    "MutatedObject",
    "MutationOptions",
    "MutationRequest",
    "MutationResult",
    "MutationUnavailable",
    "Mutator",
    "MutatorError",
    "MutatorSet",
    "build_mutator_set",
    "check_mutator",
    "expand_output",
    "is_mutator",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
