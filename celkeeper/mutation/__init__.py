"""Gatekeeper's mutators, run by Gatekeeper's own code in celkeeper's native library (see
`celkeeper.mutation.mutators`)."""

from celkeeper.mutation.expandoutput import expand_output
from celkeeper.mutation.mutators import (
    GROUP,
    KINDS,
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
    is_mutator,
)

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
