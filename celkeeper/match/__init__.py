"""A constraint's `spec.match`: which objects it applies to, exactly as Gatekeeper decides it.

Semantics of gatekeeper pkg/mutation/match/match.go (Matches, run for the object and for the old
object - either matching is enough, pkg/target/matcher.go matchAny):

- kinds[] {apiGroups, kinds}: an entry matches when its kinds are empty, contain `*` or the object's
  kind, and its apiGroups are empty, contain `*` or the object's group (versions are ignored);
- scope: `Cluster` matches Namespaces and objects without a namespace, `Namespaced` other objects
  with a namespace, anything else everything;
- namespaces / excludedNamespaces: globs (`exact`, `prefix*`, `*suffix`, `*contains*`) on the
  namespace: a Namespace object's own name, else the looked-up Namespace's name, else the object's
  metadata.namespace; objects without any namespace always match (and are never excluded);
  `processes` limits excludedNamespaces to some Gatekeeper processes (audit, webhook, ...);
- labelSelector on the object's labels; namespaceSelector on the labels of the object's Namespace
  (a Namespace's own labels); cluster-scoped objects always match it; a namespaced object whose
  Namespace is unknown is an error;
- name: glob on metadata.name; a glob ending in `*` also matches metadata.generateName;
- source: All (default) | Original | Generated (objects an ExpansionTemplate generated,
  celkeeper.expansion).

Errors are Gatekeeper's texts; a match error makes the constraint a violation (review.py).
"""

from celkeeper.match.criteria import (
    CRITERIA,
    WILDCARD,
    KindSelector,
    LabelSelector,
    Match,
    MatchError,
    Requirement,
    Target,
    targets_of,
    wildcard_matches,
    wildcard_matches_generate_name,
)
from celkeeper.match.reading import parse_match

__all__ = [
    "CRITERIA",
    "WILDCARD",
    "KindSelector",
    "LabelSelector",
    "Match",
    "MatchError",
    "Requirement",
    "Target",
    "parse_match",
    "targets_of",
    "wildcard_matches",
    "wildcard_matches_generate_name",
]
