"""One result of a review as the offline tools report it (`test`, `verify`, gator's JSON): what suites'
results (suiteresults.py) are made of, in a module of its own so that `test` does not import those."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Violation:
    """One result of a review, as Gatekeeper reports it: the message, the constraint's enforcement
    action and, for a `scoped` one, the actions that apply at this enforcement point."""

    message: str
    enforcement_action: str
    scoped_actions: tuple[str, ...] = ()
    constraint: tuple[str, str] = ("", "")  # (kind, name) of the violated constraint

    def to_json(self) -> dict[str, object]:
        return {
            "msg": self.message,
            "enforcementAction": self.enforcement_action,
            "scopedEnforcementActions": list(self.scoped_actions),
        }
