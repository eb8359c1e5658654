// celkeeper's copy of k8s.io/apiserver v0.36.2 pkg/admission/plugin/policy/validating/plugin.go, compiled
// in its place (celkeeper/native/go/patched.py). Derived from the file whose sha256 is
//   5142fd78565e2a3a453b7f1686e1e84d752a498deb01d2acdd6b7819dbccda11
// (tests/native/test_locate_patches.py checks that the module cache holds it). Changes marked
// "celkeeper:" below; docs/known-issues.md says why and when they can go:
//   - the plugin's policy source compiles its policies with a policyCompiler, which shares one
//     CompositedCompiler (the CEL environment extended with `variables`, and the policy's variables
//     compiled in it) between the policies whose variables (names and expressions, in order) and paramKind
//     presence are the same, instead of making one per policy. Such a compiler is made by the same calls as
//     upstream's, on the same inputs, and is only read once made (compiling a condition does not change
//     it; evaluating one makes a context of its own), so each policy's Validator is the one upstream's
//     compilePolicy makes. The source compiles them on as many goroutines as a client with a CompileWorkers
//     method asks for (generic's SetCompileWorkers; upstream's clients have none: one after the other): the
//     policyCompiler's map is locked, the environments it compiles in are built once, under sync.Once.
//   - the dispatcher is given only the hooks whose policy's rules may match the request
//     (generic.NewRuleIndexedDispatcher): those it leaves out are the hooks upstream's dispatcher skips
//     (DefinitionMatches false, no error), so the answer is the same.

/*
Copyright 2024 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package validating

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	v1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/manifest/metrics"
	"k8s.io/apiserver/pkg/admission/plugin/policy/config"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/manifest/source"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

const (
	// PluginName indicates the name of admission plug-in
	PluginName = "ValidatingAdmissionPolicy"
)

var (
	lazyCompositionEnvTemplateWithStrictCostInit sync.Once
	lazyCompositionEnvTemplateWithStrictCost     *environment.EnvSet
)

func getCompositionEnvTemplateWithStrictCost() *environment.EnvSet {
	lazyCompositionEnvTemplateWithStrictCostInit.Do(func() {
		lazyCompositionEnvTemplateWithStrictCost = environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	})
	return lazyCompositionEnvTemplateWithStrictCost
}

// Register registers a plugin
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(configFile io.Reader) (admission.Interface, error) {
		return NewPlugin(configFile)
	})
}

// Plugin is an implementation of admission.Interface.
type Policy = v1.ValidatingAdmissionPolicy
type PolicyBinding = v1.ValidatingAdmissionPolicyBinding
type PolicyEvaluator = Validator
type PolicyHook = generic.PolicyHook[*Policy, *PolicyBinding, PolicyEvaluator]

type Plugin struct {
	*generic.Plugin[PolicyHook]
}

var _ admission.Interface = &Plugin{}
var _ admission.ValidationInterface = &Plugin{}
var _ initializer.WantsExcludedAdmissionResources = &Plugin{}
var _ initializer.WantsManifestLoaders = &Plugin{}

// SetManifestLoaders provides the manifest load functions for scheme-based defaulting and validation.
func (a *Plugin) SetManifestLoaders(loaders *initializer.ManifestLoaders) {
	if loaders == nil || loaders.LoadValidatingPolicyManifests == nil {
		return
	}
	loadFunc := loaders.LoadValidatingPolicyManifests
	a.SetStaticSourceFactory(func(manifestsDir string) (generic.ReloadableSource[PolicyHook], error) {
		staticSource := source.NewStaticPolicySource(manifestsDir, a.GetAPIServerID(),
			func(p *v1.ValidatingAdmissionPolicy) (Validator, error) {
				v := compilePolicy(p)
				if err := v.CompileError(); err != nil {
					return nil, err
				}
				return v, nil
			},
			func(dir string) ([]*v1.ValidatingAdmissionPolicy, []*v1.ValidatingAdmissionPolicyBinding, string, error) {
				return loadFunc(dir)
			},
			func(b *v1.ValidatingAdmissionPolicyBinding) string { return b.Spec.PolicyName },
			metrics.VAPManifestType,
		)
		if err := staticSource.LoadInitial(); err != nil {
			return nil, err
		}
		return staticSource, nil
	})
}

func NewPlugin(configFile io.Reader) (*Plugin, error) {
	cfg, err := config.LoadValidatingConfig(configFile)
	if err != nil {
		return nil, err
	}

	handler := admission.NewHandler(admission.Connect, admission.Create, admission.Delete, admission.Update)

	p := &Plugin{
		Plugin: generic.NewPlugin(
			handler,
			func(f informers.SharedInformerFactory, client kubernetes.Interface, dynamicClient dynamic.Interface, restMapper meta.RESTMapper) generic.Source[PolicyHook] {
				source := generic.NewPolicySource(
					f.Admissionregistration().V1().ValidatingAdmissionPolicies().Informer(),
					f.Admissionregistration().V1().ValidatingAdmissionPolicyBindings().Informer(),
					NewValidatingAdmissionPolicyAccessor,
					NewValidatingAdmissionPolicyBindingAccessor,
					newPolicyCompiler().compile, // celkeeper: upstream compilePolicy
					f,
					dynamicClient,
					restMapper,
				)
				// celkeeper: the policies compiled on as many goroutines as the client asks for (celkeeper's
				// in-memory client: the machine's cores; a policyCompiler is safe for concurrent use)
				if w, ok := client.(interface{ CompileWorkers() int }); ok {
					if s, ok := source.(interface{ SetCompileWorkers(int) }); ok {
						s.SetCompileWorkers(w.CompileWorkers())
					}
				}
				return source
			},
			func(a authorizer.Authorizer, m *matching.Matcher, client kubernetes.Interface) generic.Dispatcher[PolicyHook] {
				// celkeeper: upstream NewDispatcher(a, generic.NewPolicyMatcher(m)), given only the hooks whose
				// policy's rules may match the request (generic.NewRuleIndexedDispatcher)
				return generic.NewRuleIndexedDispatcher(NewDispatcher(a, generic.NewPolicyMatcher(m)), m, func(h PolicyHook) generic.PolicyAccessor {
					return NewValidatingAdmissionPolicyAccessor(h.Policy)
				})
			},
		),
	}
	p.SetEnabled(true)
	p.SetStaticManifestsDir(cfg.StaticManifestsDir)
	return p, nil
}

// Validate makes an admission decision based on the request attributes.
func (a *Plugin) Validate(ctx context.Context, attr admission.Attributes, o admission.ObjectInterfaces) error {
	return a.Plugin.Dispatch(ctx, attr, o)
}

func compilePolicy(policy *Policy) Validator {
	return compilePolicyWith(policy, newFilterCompiler)
}

// celkeeper: newFilterCompiler is what upstream's compilePolicy does to make the policy's composited
// compiler and compile its variables in it.
func newFilterCompiler(variables []v1.Variable, optionalVars cel.OptionalVariableDeclarations) (*cel.CompositedCompiler, error) {
	filterCompiler, err := cel.NewCompositedCompiler(getCompositionEnvTemplateWithStrictCost())
	if err != nil {
		return nil, err
	}
	filterCompiler.CompileAndStoreVariables(convertv1beta1Variables(variables), optionalVars, environment.StoredExpressions)
	return filterCompiler, nil
}

// celkeeper: policyCompiler is compilePolicy with the composited compilers shared by content: one per
// distinct (paramKind given, variables) among the policies it compiles. A failure to make one is not
// kept (each policy meets it, as upstream).
type policyCompiler struct {
	mu        sync.Mutex
	compilers map[string]*cel.CompositedCompiler
}

func newPolicyCompiler() *policyCompiler {
	return &policyCompiler{compilers: map[string]*cel.CompositedCompiler{}}
}

func (c *policyCompiler) compile(policy *Policy) Validator {
	return compilePolicyWith(policy, c.filterCompiler)
}

func (c *policyCompiler) filterCompiler(variables []v1.Variable, optionalVars cel.OptionalVariableDeclarations) (*cel.CompositedCompiler, error) {
	var key strings.Builder
	fmt.Fprintf(&key, "%t %t %t;", optionalVars.HasParams, optionalVars.HasAuthorizer, optionalVars.HasPatchTypes)
	for _, v := range variables {
		fmt.Fprintf(&key, "%d:%s%d:%s", len(v.Name), v.Name, len(v.Expression), v.Expression)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if found, ok := c.compilers[key.String()]; ok {
		return found, nil
	}
	made, err := newFilterCompiler(variables, optionalVars)
	if err == nil {
		c.compilers[key.String()] = made
	}
	return made, err
}

func compilePolicyWith(policy *Policy, filterCompilerFor func([]v1.Variable, cel.OptionalVariableDeclarations) (*cel.CompositedCompiler, error)) Validator {
	hasParam := false
	if policy.Spec.ParamKind != nil {
		hasParam = true
	}
	optionalVars := cel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: true}
	expressionOptionalVars := cel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: false}
	failurePolicy := policy.Spec.FailurePolicy
	var matcher matchconditions.Matcher = nil
	matchConditions := policy.Spec.MatchConditions
	filterCompiler, err := filterCompilerFor(policy.Spec.Variables, optionalVars) // celkeeper: see newFilterCompiler
	if err != nil {
		return NewValidator(nil, nil, nil, nil, failurePolicy, err)
	}

	if len(matchConditions) > 0 {
		matchExpressionAccessors := make([]cel.ExpressionAccessor, len(matchConditions))
		for i := range matchConditions {
			matchExpressionAccessors[i] = (*matchconditions.MatchCondition)(&matchConditions[i])
		}
		matcher = matchconditions.NewMatcher(filterCompiler.CompileCondition(matchExpressionAccessors, optionalVars, environment.StoredExpressions), failurePolicy, "policy", "validate", policy.Name)
	}
	res := NewValidator(
		filterCompiler.CompileCondition(convertv1Validations(policy.Spec.Validations), optionalVars, environment.StoredExpressions),
		matcher,
		filterCompiler.CompileCondition(convertv1AuditAnnotations(policy.Spec.AuditAnnotations), optionalVars, environment.StoredExpressions),
		filterCompiler.CompileCondition(convertv1MessageExpressions(policy.Spec.Validations), expressionOptionalVars, environment.StoredExpressions),
		failurePolicy,
		nil,
	)

	return res
}

func convertv1Validations(inputValidations []v1.Validation) []cel.ExpressionAccessor {
	celExpressionAccessor := make([]cel.ExpressionAccessor, len(inputValidations))
	for i, validation := range inputValidations {
		validation := ValidationCondition{
			Expression: validation.Expression,
			Message:    validation.Message,
			Reason:     validation.Reason,
		}
		celExpressionAccessor[i] = &validation
	}
	return celExpressionAccessor
}

func convertv1MessageExpressions(inputValidations []v1.Validation) []cel.ExpressionAccessor {
	celExpressionAccessor := make([]cel.ExpressionAccessor, len(inputValidations))
	for i, validation := range inputValidations {
		if validation.MessageExpression != "" {
			condition := MessageExpressionCondition{
				MessageExpression: validation.MessageExpression,
			}
			celExpressionAccessor[i] = &condition
		}
	}
	return celExpressionAccessor
}

func convertv1AuditAnnotations(inputValidations []v1.AuditAnnotation) []cel.ExpressionAccessor {
	celExpressionAccessor := make([]cel.ExpressionAccessor, len(inputValidations))
	for i, validation := range inputValidations {
		validation := AuditAnnotationCondition{
			Key:             validation.Key,
			ValueExpression: validation.ValueExpression,
		}
		celExpressionAccessor[i] = &validation
	}
	return celExpressionAccessor
}

func convertv1beta1Variables(variables []v1.Variable) []cel.NamedExpressionAccessor {
	namedExpressions := make([]cel.NamedExpressionAccessor, len(variables))
	for i, variable := range variables {
		namedExpressions[i] = &Variable{Name: variable.Name, Expression: variable.Expression}
	}
	return namedExpressions
}
