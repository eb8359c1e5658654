"""Why Kubernetes' admission policies answer a request as they do (`celkeeper explain` on
ValidatingAdmissionPolicies and MutatingAdmissionPolicies).

    explained = policies.explain({"operation": "CREATE", "object": obj})   # AdmissionPolicies.explain
    explained.answer            # the API server's answer (its admission chain: the authority)
    explained.validating        # per policy and binding: applied or why not, params, matchConditions,
    explained.mutating          #   validations, audit annotations, mutations
    trace_lines(explained)      # the trace as text

The trace is made by the native library with the API server's plugins' own compiled policies, matcher
and parameter lookup (celkeeper/native/go/admissionpolicy/explain.go); the mutating policies' in one pass
(their reinvocation is not traced), the validating ones' on the object the mutating ones left.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from celkeeper.admissionpolicy.policies import Explained

VALUE_WIDTH = 100


def trace_lines(explained: Explained, indent: str = "  ") -> list[str]:
    """The trace as text: one line per binding that did not apply, the details of those that did."""
    lines: list[str] = []
    for trace in explained.mutating:
        lines += _binding_lines(trace, indent)
    if explained.validating and not explained.validated:
        lines.append(
            f"{indent}(the validating policies were not called: a mutating policy denied the request)"
        )
    for trace in explained.validating:
        lines += _binding_lines(trace, indent)
    if not lines:
        lines.append(f"{indent}no admission policy")
    return lines


def _binding_lines(trace: Mapping[str, Any], indent: str) -> list[str]:
    name = f"{trace.get('kind')}/{trace.get('policy')}"
    if trace.get("binding"):
        name += f" binding {trace['binding']}"
    if trace.get("error"):
        return [f"{indent}{name}  ERROR (failurePolicy {trace.get('failurePolicy')}): {trace['error']}"]
    if not trace.get("applied"):
        where = f" ({trace['excluded']})" if trace.get("excluded") else ""
        return [f"{indent}{name}  not applied{where}: {trace.get('reason', '')}"]
    details = [f"failurePolicy {trace.get('failurePolicy')}"]
    if trace.get("validationActions"):
        details.insert(0, "validationActions " + ",".join(trace["validationActions"]))
    lines = [f"{indent}{name}  applied  ({'; '.join(details)})"]
    inner = indent + "  "
    params: Sequence[Mapping[str, Any]] = trace.get("params") or ()
    ref = trace.get("paramRef")
    if not params:
        lines.append(f"{inner}{trace.get('reason') or 'nothing evaluated'}")
    for param in params:
        deeper = inner
        if ref is not None or param.get("param"):
            lines.append(f"{inner}param {param.get('param') or '(none)'}")
            deeper = inner + "  "
        lines += _param_lines(param, deeper)
    return lines


def _param_lines(param: Mapping[str, Any], indent: str) -> list[str]:
    lines: list[str] = []
    if param.get("conditionError"):
        lines.append(f"{indent}matchConditions  error: {param['conditionError']}")
    elif not param.get("matched"):
        lines.append(f"{indent}matchCondition {param.get('failedCondition')!r}  false: not evaluated further")
    if param.get("error"):
        lines.append(f"{indent}error: {param['error']}")
    for v in param.get("validations") or ():
        result = str(v.get("result"))
        text = f"{indent}validation[{v.get('index')}]  {result}"
        if result == "failed":
            text += f": {v.get('message')}"
            if v.get("reason") and v.get("reason") != "Invalid":
                text += f"  ({v['reason']})"
        elif result == "error":
            text += f"{' (ignored: failurePolicy Ignore)' if v.get('ignored') else ''}: {v.get('message')}"
        lines.append(text)
        lines.append(f"{indent}  {_cut(str(v.get('expression', '')))}")
        if result == "failed" and v.get("messageExpression"):
            lines.append(f"{indent}  messageExpression: {_cut(str(v['messageExpression']))}")
    for a in param.get("auditAnnotations") or ():
        if a.get("result") == "published":
            value = json.dumps(a.get("value"), ensure_ascii=False)
            lines.append(f"{indent}auditAnnotation {a.get('key')}  {_cut(value)}")
        elif a.get("result") == "error":
            lines.append(f"{indent}auditAnnotation {a.get('key')}  error: {a.get('error')}")
        else:
            lines.append(f"{indent}auditAnnotation {a.get('key')}  excluded (null or empty)")
    for m in param.get("mutations") or ():
        head = f"{indent}mutation[{m.get('index')}] {m.get('patchType')}"
        if m.get("error"):
            lines.append(f"{head}  error: {m['error']}")
        elif m.get("patch") is not None:
            patch = json.dumps(m["patch"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            lines.append(f"{head}  {_cut(patch)}")
        else:
            lines.append(f"{head}  no change")
    return lines


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= VALUE_WIDTH else text[: VALUE_WIDTH - 1] + "…"
