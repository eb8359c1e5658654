"""celkeeper's copies of dependencies' files (celkeeper/native/go/_patches, built in place of the module's
own by celkeeper/native/go/patched.py's go.mod, which celkeeper.native.locate's build hash covers;
docs/known-issues.md): each was made from the file the module cache holds, the build uses them, and
upstream still needs them. When one of the `upstream_..._still` tests fails, the module that go.mod
requires behaves as its copy does: remove the copy (and its PATCHES entry). Their `go test` runs reuse Go's
cached result of an unchanged package (see tests/native/test_go_module.py)."""

from __future__ import annotations

import hashlib
import re

from celkeeper.native.locate import go_sources
from tests.support.native import go, go_flags, patched, run_go

CEL_GO = "github.com/google/cel-go"
GATEKEEPER = "github.com/open-policy-agent/gatekeeper/v3"
APISERVER = "k8s.io/apiserver"


def upstream_and_copy(module: str, path: str) -> tuple[str, str]:
    """The text of `module`'s file at `path` (slash-separated, in the module) as go.mod requires it (the
    module cache's), and of celkeeper's copy of it."""
    build = patched()
    upstream = (build.module_dir(module, go()) / path).read_text()
    return upstream, (build.PATCHES_DIR / build.PATCHES[module] / path).read_text()


def test_each_copy_was_made_from_the_file_the_module_cache_holds() -> None:
    tool = go()
    build = patched()
    for module, folder in build.PATCHES.items():
        for copy in (build.PATCHES_DIR / folder).rglob("*.go"):
            text = copy.read_text()
            derived = re.search(r"Derived from the file whose sha256 is\n//\s+([0-9a-f]{64})", text)
            assert derived, f"{copy} does not say which file it was made from"
            upstream = build.module_dir(module, tool) / copy.relative_to(build.PATCHES_DIR / folder)
            assert hashlib.sha256(upstream.read_bytes()).hexdigest() == derived.group(1), (
                f"{upstream} is not the file {copy} was made from: go.mod moved {module}; make the copy "
                "again from the new file (or drop it if the new release needs none)"
            )


def test_the_build_uses_the_copies() -> None:
    build = patched()
    modfile = build.patched_modfile(go())
    assert f"-modfile={modfile}" in go_flags(go())
    replaced = modfile.read_text()
    sources = go_sources()
    for module, folder in build.PATCHES.items():
        copy_root = modfile.parent / folder
        assert f"replace {module} => {copy_root}" in replaced
        for copy in (build.PATCHES_DIR / folder).rglob("*.go"):
            assert copy in sources  # a change to a copy is a new build of the library
            assert (
                copy_root / copy.relative_to(build.PATCHES_DIR / folder)
            ).read_bytes() == copy.read_bytes()


def _upstream_cel_go_passes(tests: str) -> None:
    """The k8scel tests matching `tests` pass in their upstream mode (CELKEEPER_UPSTREAM_COST=1), on the
    module as go.mod requires it (no patched go.mod): the cel-go copies they test are still needed."""
    out = run_go(
        "test", "-run", tests, "./k8scel", env={"GOFLAGS": "-mod=readonly", "CELKEEPER_UPSTREAM_COST": "1"}
    )
    assert "ok" in out
    assert CEL_GO in patched().PATCHES


def test_upstream_cel_go_still_needs_the_copy_of_runtimecost() -> None:
    """k8scel/costpatch_test.go in its upstream mode, on the module as it is (no patched go.mod): cel-go's
    cost observer allocates per operator, grows each evaluation's stack from nothing, charges 1 for `+`
    chosen at run time, and makes a value before refusing it. (The same tests, as the library is built,
    show the copy's behaviour: test_go_module.)"""
    _upstream_cel_go_passes(
        "TestGrowthIsRefusedBeforeItIsMade|TestConcatenationCostsWhatItsOverloadCosts|"
        "TestObservingCostsAllocatesNothingPerOperator|TestCostTrackersReuseTheirStacks",
    )


def test_upstream_cel_go_still_needs_the_copy_of_frame() -> None:
    """k8scel/framepatch_test.go in its upstream mode, on the module as it is: cel-go's ContextEval makes
    the state of asynchronous calls (a cancellable context registered with its parent, a gate) for every
    evaluation, which Eval does not."""
    _upstream_cel_go_passes(
        "TestEvaluatingWithAContextMakesNothingForAsynchronousCalls",
    )


def test_upstream_cel_go_still_needs_the_copy_of_list() -> None:
    """k8scel/listpatch_test.go in its upstream mode, on the module as it is: cel-go's lists hold a closure
    reading their elements (an allocation more for every list made), a mutable list is three allocations
    and a list's iterator 48 bytes."""
    _upstream_cel_go_passes(
        "TestListsMakeNoClosure",
    )


def test_upstream_cel_go_still_needs_the_copies_of_program_and_env() -> None:
    """k8scel/programpatch_test.go in its upstream mode, on the module as it is: each of cel-go's programs
    fills a dispatcher of its own with every overload of its environment (tens of kilobytes a program)."""
    _upstream_cel_go_passes(
        "TestProgramsOfAnEnvironmentShareItsDispatcher|TestAProgramsOwnFunctionsAreItsOwn",
    )


def test_upstream_gatekeeper_still_compares_passes_with_go_cmp() -> None:
    """Gatekeeper's mutation System, as go.mod requires it, compares each pass's object with go-cmp's
    cmp.Equal (the copy compares with UnstructuredEqual, reflect.DeepEqual's answer without reflection
    for JSON's values: same answer, without the difference report that was half of a mutation's CPU),
    and copies the object before mutation for its log even when the log is off (the copy only when it is
    on). When upstream stops doing both, drop the copy. The copy's answers are Gatekeeper's:
    tests/e2e/gatekeeper's differential runs it against Gatekeeper's manager, Gatekeeper's own tests of
    the package pass with it (below), and mutation/equal_test.go compares UnstructuredEqual with
    reflect.DeepEqual."""
    upstream, copy = upstream_and_copy(GATEKEEPER, "pkg/mutation/system.go")
    assert "cmp.Equal(old, mutable.Object)" in upstream
    assert "\toriginal := unversioned.DeepCopyWithPlaceholders(mutable.Object)\n" in upstream
    assert "UnstructuredEqual(old, mutable.Object)" in copy
    assert "if *MutationLoggingEnabled {\n\t\toriginal = unversioned.DeepCopyWithPlaceholders" in copy


def test_upstream_gatekeeper_still_copies_the_object_anew_for_each_pass() -> None:
    """Gatekeeper's mutation System, as go.mod requires it, makes each pass's copy of the object anew
    (DeepCopyWithPlaceholders: ~23 KB for bench/mutation.py's Pod, twice per mutated request); the copy
    makes it into the maps and slices of a copy no longer needed (CopyObject, RecycleCopy: the same copy,
    mutation/equal_test.go). When upstream reuses them, drop that change of the copy."""
    upstream, copy = upstream_and_copy(GATEKEEPER, "pkg/mutation/system.go")
    assert "\t\told := unversioned.DeepCopyWithPlaceholders(mutable.Object)\n" in upstream
    assert "\t\told := CopyObject(spare, mutable.Object)\n" in copy


def test_gatekeepers_own_tests_of_the_mutation_system_pass_with_the_copy() -> None:
    out = run_go("test", f"{GATEKEEPER}/pkg/mutation")
    assert "ok" in out


def test_upstream_apiserver_still_converts_the_request_for_every_activation() -> None:
    """k8s.io/apiserver's CEL admission activation, as go.mod requires it, converts the `request` and
    `namespaceObject` variables to unstructured for every expression group of every policy (the copy
    converts each distinct value once per admission request, when the request's context carries an
    ActivationCache: admissionpolicy/review.go sets one). When upstream stops converting them per
    activation, drop the copy and the WithActivationCache call. The copy's answers are the API server's:
    tests/admissionpolicy's differential runs it against a real kube-apiserver."""
    upstream, copy = upstream_and_copy(APISERVER, "pkg/admission/plugin/cel/activation.go")
    assert "requestVal, err := convertObjectToUnstructured(request)" in upstream
    assert "namespaceVal, err := objectToResolveVal(namespace)" in upstream
    assert "ActivationCache" not in upstream
    assert "func WithActivationCache(ctx context.Context, shared *NamespaceMaps) context.Context" in copy


def test_upstream_apiserver_still_makes_the_authorizer_variables_for_every_activation() -> None:
    """k8s.io/apiserver's CEL admission activation, as go.mod requires it, makes the `authorizer` variables
    (two CEL type values and the resource authorizer's value) for every expression group of every policy,
    whether an expression reads them or not (the copy makes them when first read). When upstream makes
    them lazily, drop that change of the copy."""
    upstream, copy = upstream_and_copy(APISERVER, "pkg/admission/plugin/cel/activation.go")
    made = "authorizerVal = library.NewAuthorizerVal(versionedAttr.GetUserInfo(), inputs.Authorizer)"
    assert made in upstream
    assert "func (a *evaluationActivation) authorizers() (interface{}, interface{}) {" in copy


def test_upstream_apiserver_still_lists_the_policy_hooks_in_map_order() -> None:
    """k8s.io/apiserver's policy source, as go.mod requires it, builds the admission-policy hooks by
    ranging over a Go map of policies (random order on every refresh) with each policy's bindings in the
    informer's order; the dispatchers answer with the first denial, so a request two policies deny gets
    either answer. The copy lists both in name order (admissionpolicy/set_test.go's
    TestTheFirstDenialIsThatOfThePolicyAndBindingFirstByName fails without it). When upstream orders
    them, drop the copy."""
    upstream, copy = upstream_and_copy(APISERVER, "pkg/admission/plugin/policy/generic/policy_source.go")
    assert "for policyKey, bindingSpecs := range policiesToBindings {" in upstream
    assert "sort." not in upstream and "slices.Sort" not in upstream
    assert "for _, policyKey := range policyKeys {" in copy


def test_upstream_apiserver_still_builds_every_environment_of_a_compiler() -> None:
    """k8s.io/apiserver's CEL admission compiler, as go.mod requires it, builds the environments of all
    eight variable declarations when it is made (the copy builds each when first compiled with: a policy
    uses two; every policy with variables makes a compiler, in the API server's validation and in the
    plugin). When upstream builds them lazily, drop the copy."""
    upstream, copy = upstream_and_copy(APISERVER, "pkg/admission/plugin/cel/compile.go")
    assert "return &compiler{varEnvs: mustBuildEnvs(env)}" in upstream
    assert "return &compiler{varEnvs: newLazyVariableDeclEnvs(env)}" in copy


def test_upstream_apiserver_still_makes_a_composited_compiler_per_policy() -> None:
    """The validating admission policy plugin, as go.mod requires it, makes a CompositedCompiler (a CEL
    environment extended with `variables`, the variables compiled in it) for every policy it compiles (the
    copy shares one between the policies with the same variables and paramKind presence). When upstream
    shares them, drop the copy."""
    upstream, copy = upstream_and_copy(APISERVER, "pkg/admission/plugin/policy/validating/plugin.go")
    assert "filterCompiler, err := cel.NewCompositedCompiler(compositionEnvTemplate)" in upstream
    assert "\t\t\t\t\tcompilePolicy,\n" in upstream
    assert "newPolicyCompiler().compile, // celkeeper: upstream compilePolicy" in copy


def test_upstream_apiserver_still_polls_readiness_every_100_ms() -> None:
    """k8s.io/apiserver's admission Handler, as go.mod requires it, checks whether a plugin is ready every
    100 ms (the copy every 2 ms: a policy set is ready ~40 ms after its plugins start, and each `celkeeper
    test` on admission policies waited up to 100 ms more). When upstream polls as often, drop the copy."""
    upstream, copy = upstream_and_copy(APISERVER, "pkg/admission/handler.go")
    assert "case <-time.After(100 * time.Millisecond):" in upstream
    assert "readyPollPeriod = 2 * time.Millisecond" in copy


def test_upstream_apiserver_still_parses_the_selectors_for_every_request() -> None:
    """k8s.io/apiserver's admission-policy matcher, as go.mod requires it, parses a policy's and a binding's
    namespaceSelector and objectSelector (metav1.LabelSelectorAsSelector: each label key and value checked
    by regular expressions) every time it matches a request (the copy parses them once per MatchResources
    object: admissionpolicy/selectors_test.go shows each binding still selects by its own). When upstream
    keeps them parsed, drop the copy."""
    upstream, copy = upstream_and_copy(APISERVER, "pkg/admission/plugin/policy/generic/policy_matcher.go")
    assert "return metav1.LabelSelectorAsSelector(m.constraints.NamespaceSelector)" in upstream
    assert "criteria := matchCriteria{constraints: matchResources}" in upstream
    assert "criteria := c.criteria(matchResources)" in copy


def test_upstream_apiserver_still_matches_every_policy_against_each_request() -> None:
    """The validating admission policy plugin, as go.mod requires it, hands its dispatcher every policy of
    the set for each request, and the dispatcher matches each one's rules (with matchPolicy Equivalent,
    looking up the equivalent resources twice) before it can skip it (the copy's dispatcher is given only
    the policies whose rules may match the request's resource, subresource and operation, remembered per
    set: generic.NewRuleIndexedDispatcher; admissionpolicy/rulesindex_test.go shows those left out are
    those that do not match). When upstream indexes the policies, drop that part of the copies."""
    upstream, copy = upstream_and_copy(APISERVER, "pkg/admission/plugin/policy/validating/plugin.go")
    assert "return NewDispatcher(a, generic.NewPolicyMatcher(m))" in upstream
    assert "generic.NewRuleIndexedDispatcher(NewDispatcher(a, generic.NewPolicyMatcher(m)), m," in copy
    module = patched().module_dir(APISERVER, go()) / "pkg/admission/plugin/policy"
    dispatcher = (module / "validating/dispatcher.go").read_text()
    loop = dispatcher.index("for _, hook := range hooks {")
    assert "c.matcher.DefinitionMatches(a, o," in dispatcher[loop : loop + 800]
    assert (
        "return c.dispatcher.Dispatch(ctx, a, o, c.source.Hooks())"
        in (module / "generic/plugin.go").read_text()
    )


def test_upstream_apiserver_still_compiles_the_policies_one_after_the_other() -> None:
    """The admission policy plugins' policy source, as go.mod requires it, compiles the policies of a
    refresh one after the other, under its lock (the copy compiles the validating plugin's on every core
    first: SetCompileWorkers). When upstream compiles them concurrently, drop that part of the copies."""
    upstream, copy = upstream_and_copy(APISERVER, "pkg/admission/plugin/policy/generic/policy_source.go")
    assert "Evaluator:          s.compilePolicyLocked(policySpec)," in upstream
    assert "go func" not in upstream[upstream.index("func (s *policySource[P, B, E]) calculatePolicyData") :]
    assert "s.compileAheadLocked(policyKeys) // celkeeper" in copy


def test_upstream_kubernetes_still_validates_a_policy_as_its_metadata_then_its_spec() -> None:
    """The API server's create validation of a ValidatingAdmissionPolicy, as go.mod requires it, is its
    ObjectMeta's errors followed by its spec's, the spec's reading the ObjectMeta only for the name of
    audit annotation keys: celkeeper's set validates each distinct spec once on that ground
    (admissionpolicy/speccheck.go; speccheck_test.go compares it with the whole validation). When this
    fails, look again at what the spec's validation reads before keeping specChecks."""
    source = patched().module_dir("k8s.io/kubernetes", go()) / "pkg/apis/admissionregistration/validation"
    text = (source / "validation.go").read_text()
    composed = (
        "allErrors := genericvalidation.ValidateObjectMeta(&p.ObjectMeta, false, "
        'genericvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))\n'
        "\tallErrors = append(allErrors, validateValidatingAdmissionPolicySpec(p.ObjectMeta, &p.Spec, opts, "
        'field.NewPath("spec"))...)\n\treturn allErrors'
    )
    assert composed in text
    spec = text[text.index("func validateValidatingAdmissionPolicySpec(meta metav1.ObjectMeta") :]
    spec = spec[: spec.index("\n}\n")]
    # `meta` is its parameter and what it passes to validateAuditAnnotation, nothing else
    assert re.findall(r"\bmeta\b", spec) == ["meta", "meta"]
    assert "validateAuditAnnotation(getCompiler(), meta, &auditAnnotation," in spec
    audit = text[text.index("func validateAuditAnnotation(") :]
    audit = audit[: audit.index("\n}\n")]
    assert set(re.findall(r"\bmeta\.\w+", audit)) == {"meta.GetName"}
