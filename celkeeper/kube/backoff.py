"""The wait before a retry that doubles: `first` after the first failure, twice that after the next, and
so on, never more than `longest`, however many failures (the reflector's retries, the controller loop's,
a contested status's rewrites).

Adapter (celkeeper.kube): client-go's wait.Backoff, its Duration, Factor 2 and Cap.
"""

from __future__ import annotations

#: doublings after which the exponent stops growing: 2.0 ** n of an unbounded n overflows a float, and every
#: cap celkeeper sets is reached long before (30 s from 0.2 s is 8 doublings)
_MOST_DOUBLINGS = 60


def doubling(first: float, longest: float, n: int) -> float:
    """The wait after `n` doublings (n = 0: `first`), at most `longest`."""
    return min(longest, first * 2.0 ** min(max(n, 0), _MOST_DOUBLINGS))
