"""PolicySet: an immutable set of compiled templates and their constraints, indexed by kind.

CONTRACT (implemented by the policy-model work; the webhook, informer and CLI code against it):

    compiler = TemplateCompiler(engine)          # long-lived per process/worker: caches compiled
                                                 # templates by content hash (unchanged content is
                                                 # never recompiled)
    policies = build_policy_set(documents, compiler)
    policies.templates        -> Mapping[str, CompiledTemplate]   (by template name)
    policies.constraints      -> tuple[Constraint, ...]
    policies.errors           -> tuple[CelkeeperError, ...]  every problem found (file, document, field,
                                 line:col); a broken document is reported here and left out, the
                                 rest is still built
    policies.candidates(group, kind) -> the (template, constraint) pairs whose match.kinds can
                                 select objects of that API group and kind (cheap, indexed)

`documents` is an iterable of celkeeper.documents.Document (templates and constraints, in any order,
celkeeper's and Gatekeeper's API groups).
"""
