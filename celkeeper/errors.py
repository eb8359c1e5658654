"""Errors users see. Every error knows where it happened: file, document, field path, line:col.

Nothing here imports anything of celkeeper's; every layer may raise these.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Self


@dataclass(frozen=True)
class Location:
    """Where a problem is: any part may be unknown (None)."""

    file: str | None = None
    document: int | None = None  # 1-based index of the YAML/JSON document in the file
    path: str | None = None  # field path, e.g. spec.targets[0].code[0].source.validations[2].expression
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based

    def __str__(self) -> str:
        parts: list[str] = []
        if self.file:
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            parts.append(where)
        elif self.line is not None:
            parts.append(f"{self.line}:{self.column or 1}")
        if self.document is not None and self.file:
            parts.append(f"document {self.document}")
        if self.path:
            parts.append(self.path)
        return ": ".join(parts)


class CelkeeperError(Exception):
    """Base of every error celkeeper raises on purpose. str() is one clear line for users."""

    def __init__(self, message: str, location: Location | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.location = location or Location()

    def at(
        self,
        *,
        file: str | None = None,
        document: int | None = None,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> Self:
        """A copy of this error with more of its location filled in (fields already known are kept).

        The copy keeps what tells how the error came about: its cause (`__cause__`), context
        (`__context__`, `__suppress_context__`), traceback and notes. Re-raise it in the handler with
        `raise err.at(...) from err.__cause__`: a bare `raise` there would set the copy's context to
        `err`, the same error without the location."""
        err = type(self).__new__(type(self), *self.args)  # no __init__: subclasses take other arguments
        err.__dict__.update(self.__dict__)  # message, location, notes and a subclass's own fields
        err.location = replace(
            self.location,
            file=self.location.file if self.location.file is not None else file,
            document=self.location.document if self.location.document is not None else document,
            path=self.location.path if self.location.path is not None else path,
            line=self.location.line if self.location.line is not None else line,
            column=self.location.column if self.location.column is not None else column,
        )
        err.__cause__ = self.__cause__
        err.__context__ = self.__context__
        err.__suppress_context__ = self.__suppress_context__
        return err.with_traceback(self.__traceback__)

    def __str__(self) -> str:
        where = str(self.location)
        return f"{where}: {self.message}" if where else self.message


class CelCompileError(CelkeeperError):
    """A CEL source that does not compile. line/column are 1-based within the expression source.

    `limit` names the safety limit that was exceeded, if that is why it failed.
    """

    def __init__(
        self,
        message: str,
        line: int = 1,
        column: int = 1,
        limit: str | None = None,
        issues: tuple[tuple[int, int, str], ...] = (),
    ) -> None:
        super().__init__(message, Location(line=line, column=column))
        self.line = line
        self.column = column
        self.limit = limit
        #: every error found, (line, column, message) in source order, when there are several
        self.issues = issues or ((line, column, message),)


class DocumentError(CelkeeperError):
    """A file or document that cannot be parsed (YAML/JSON syntax, not a mapping, ...)."""


class TemplateError(CelkeeperError):
    """A ConstraintTemplate that is invalid (structure, names, CEL compile errors)."""


class TemplateWarning(TemplateError):
    """A problem of a template that Gatekeeper still loads: an expression that does not compile (it
    fails each request it applies to, as in Gatekeeper), or a key Gatekeeper ignores. Reported by
    lint, verify -v and the template's status; it never stops the template from being enforced."""


class CompileWarning(TemplateWarning):
    """A part of a template that decides (a validation, a variable, a match condition) and does not
    compile: Gatekeeper loads the template and the part fails each request it applies to (so do the
    webhook and `verify`); the offline tools report it as an error (lint, test, audit, verify: it is a
    policy that does not do what it says). A messageExpression that does not compile is a plain
    TemplateWarning: its validation's `message` is used instead, the decision is the same."""


def is_warning(err: CelkeeperError) -> bool:
    return isinstance(err, TemplateWarning)


def is_compile_problem(err: CelkeeperError) -> bool:
    """A template's CEL that does not compile (a warning to the webhook, an error to the offline tools)."""
    return isinstance(err, CompileWarning)


class ConstraintError(CelkeeperError):
    """A constraint that is invalid (unknown kind, parameters against the schema, enforcementAction)."""


class ConstraintSchemaError(ConstraintError):
    """A constraint that breaks its CRD's schema (parameters against the template's schema, the
    shape of spec.match): what Gatekeeper calls `schema validation failed`, the only rejection a
    Suite's `invalid: true` test accepts."""


class ReviewError(CelkeeperError):
    """A malformed AdmissionReview or admission request."""


class AdmissionPolicyError(CelkeeperError):
    """A ValidatingAdmissionPolicy, MutatingAdmissionPolicy, binding or parameter object the API server
    would refuse (its own words, located), or a request on them that cannot be reviewed."""

    #: the whole message the API server answers a create of the document with ("" when not an error of one)
    api_message: str = ""
    #: the policy or binding the problem is of: its kind, its name, and a binding's policyName (all empty
    #: when it is of no policy or binding)
    subject: tuple[str, str, str] = ("", "", "")


class AdmissionPolicyNote(AdmissionPolicyError):
    """What the API server accepts and what follows from it: a binding whose policy is not given (it
    has no effect), a Namespace assumed, a kind whose resource is guessed."""
