"""ConstraintTemplates: reading, checking and compiling them (Gatekeeper's and celkeeper's API groups).

    compiler = TemplateCompiler(engine)          # long-lived; caches compiled code by content hash
    template, errors = compiler.load(document)   # template is None when it is structurally invalid

A template whose expressions do not compile is still returned (with `errors`): at request time its
broken expressions fail as Gatekeeper's do. `compiler.bind(template, constraint)` binds a constraint.
"""

from celkeeper.templates.celsource import Expression, NamedExpression, ValidationSpec
from celkeeper.templates.compiler import CompiledTemplate, TemplateCompiler, template_source
from celkeeper.templates.parameters import ParameterSchema, SchemaProblem, Verdicts
from celkeeper.templates.spec import TemplateSpec, is_template, parse_template

__all__ = [
    "CompiledTemplate",
    "Expression",
    "NamedExpression",
    "ParameterSchema",
    "SchemaProblem",
    "TemplateCompiler",
    "TemplateSpec",
    "ValidationSpec",
    "Verdicts",
    "is_template",
    "parse_template",
    "template_source",
]
