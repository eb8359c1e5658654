package k8scel

import (
	"fmt"
	"maps"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// templateCompiler compiles templates exactly as the CompositedCompiler Gatekeeper's driver makes
// for each template (k8s.io/apiserver v0.36.2 pkg/admission/plugin/cel/composition.go
// NewCompositedCompiler, CompileAndStoreVariable; compile.go NewCompiler, createEnvForOpts,
// CompileCELExpression), but with one set of environments for every template: each template's
// compilation starts with no variable declared and declares its variables one by one as they
// compile, as a fresh CompositedCompiler does. Environments are what costs (eight per
// CompositedCompiler, each initialising its checker: ~10 ms and ~1 MB per template); the state of
// the `variables` type (its fields) is the only thing that differs between templates.
//
// A compiler compiles one template at a time (the fields are the compilation's state): a process keeps
// a pool of them (compilers), one unless more are asked for. The fields map is replaced, never changed
// in place, so that programs running meanwhile read a consistent map (cel-go reads struct field types
// only to plan field access on protobuf-style types, which the `variables` type is not: its fields never
// change what a program does).
type templateCompiler struct {
	mu      sync.Mutex
	mapType *apiservercel.DeclType
	base    *environment.EnvSet
	envs    map[envKey]*environment.EnvSet
	// the template being compiled reads synced data (its expressions see `data`)
	data bool
}

// envKey names an environment: Kubernetes' options, and whether `data` is declared.
type envKey struct {
	options plugincel.OptionalVariableDeclarations
	data    bool
}

// compilerPool holds the process's template compilers: as many templates compile at once as it has
// compilers, each on one of its own; a compilation beyond that waits for one. It makes them as they are
// first needed, up to limit (1 unless WarmCompilers raises it: each holds its own environments, ~1 MB,
// and its first template costs more than the later ones, so that a process compiling its templates one
// at a time, as the webhook's, keeps one).
type compilerPool struct {
	mu    sync.Mutex
	ready *sync.Cond // a compiler was released, or made
	idle  []*templateCompiler
	made  int // compilers made or being made
	limit int
	err   error // making a compiler failed: every compilation fails alike
}

var compilers = newCompilerPool()

func newCompilerPool() *compilerPool {
	p := &compilerPool{limit: 1}
	p.ready = sync.NewCond(&p.mu)
	return p
}

// acquire takes an idle compiler, makes one while fewer than limit exist, or waits for one; release
// must follow.
func (p *compilerPool) acquire() (*templateCompiler, error) {
	p.mu.Lock()
	for {
		if p.err != nil {
			err := p.err
			p.mu.Unlock()
			return nil, err
		}
		if n := len(p.idle); n > 0 {
			c := p.idle[n-1]
			p.idle = p.idle[:n-1]
			p.mu.Unlock()
			return c, nil
		}
		if p.made < p.limit {
			break
		}
		p.ready.Wait()
	}
	p.made++
	p.mu.Unlock()
	return p.make()
}

// make makes a compiler (counted in made by the caller); a failure is every compilation's from then on.
func (p *compilerPool) make() (*templateCompiler, error) {
	c, err := newTemplateCompiler()
	if err != nil {
		p.mu.Lock()
		p.made--
		p.err = err
		p.mu.Unlock()
		p.ready.Broadcast()
		return nil, err
	}
	return c, nil
}

func (p *compilerPool) release(c *templateCompiler) {
	p.mu.Lock()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
	p.ready.Signal()
}

// WarmCompilers lets up to n templates compile at once: the compilers the pool lacks are made now, on
// goroutines of their own, each warmed by compiling warm (see export_k8scel.go's warmTemplate), and
// join the pool when ready; compilations meanwhile use the compilers there are. For a process about to
// compile many templates from several threads (the offline tools).
func WarmCompilers(n int, warm map[string]any) {
	p := compilers
	p.mu.Lock()
	extra := n - p.limit
	if extra <= 0 || p.err != nil {
		p.mu.Unlock()
		return
	}
	p.limit = n
	p.made += extra
	p.mu.Unlock()
	for range extra {
		go func() {
			c, err := p.make()
			if err != nil {
				return
			}
			_, _ = compileTemplate(c, warm, nil)
			p.release(c)
		}()
	}
}

func newTemplateCompiler() (*templateCompiler, error) {
	// NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	// (driver.go: "StrictCost is now enabled by default in MustBaseEnvSet")
	envSet := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	newMapType := apiservercel.NewObjectType(variablesTypeName, map[string]*apiservercel.DeclField{})
	newEnvSet, err := envSet.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			cel.Variable("variables", newMapType.CelType()),
		},
		DeclTypes: []*apiservercel.DeclType{
			newMapType,
		},
	})
	if err != nil {
		return nil, err
	}
	return &templateCompiler{mapType: newMapType, base: newEnvSet, envs: map[envKey]*environment.EnvSet{}}, nil
}

// begin starts a template's compilation (no variable declared; `data` declared when the template
// reads synced data); end must follow.
func (c *templateCompiler) begin(data bool) {
	c.mu.Lock()
	c.mapType.Fields = map[string]*apiservercel.DeclField{}
	c.data = data
}

func (c *templateCompiler) end() {
	c.data = false
	c.mu.Unlock()
}

// compileAndStoreVariable is CompositedCompiler.CompileAndStoreVariable: the variable compiles in
// the environment declaring the variables before it, then is declared with its output type.
func (c *templateCompiler) compileAndStoreVariable(variable plugincel.NamedExpressionAccessor, options plugincel.OptionalVariableDeclarations) plugincel.CompilationResult {
	result, _ := c.compileReading(variable, options, environment.StoredExpressions)
	return c.storeVariable(variable, result)
}

// storeVariable declares a compiled variable with its output type (compileAndStoreVariable's second half).
func (c *templateCompiler) storeVariable(variable plugincel.NamedExpressionAccessor, result plugincel.CompilationResult) plugincel.CompilationResult {
	// compositionState.AddField (a new map: see the type's comment)
	fields := maps.Clone(c.mapType.Fields)
	fields[variable.GetName()] = apiservercel.NewDeclField(variable.GetName(), convertCelTypeToDeclType(result.OutputType), true, nil, nil)
	c.mapType.Fields = fields
	return result
}

// env is compile.go mustBuildEnvs's environment for the options, built when first needed; for a
// template that reads synced data, the same environment with `data` declared (dyn) besides.
func (c *templateCompiler) env(options plugincel.OptionalVariableDeclarations) (*environment.EnvSet, error) {
	key := envKey{options, c.data}
	if env, ok := c.envs[key]; ok {
		return env, nil
	}
	env, err := createEnvForOpts(c.base, plugincel.BuildNamespaceType(), plugincel.BuildRequestType(), options)
	if err != nil {
		return nil, err
	}
	if c.data {
		env, err = env.Extend(environment.VersionedOptions{
			IntroducedVersion: version.MajorMinor(1, 0),
			EnvOptions:        []cel.EnvOption{cel.Variable(DataVarName, cel.DynType)},
		})
		if err != nil {
			return nil, err
		}
	}
	c.envs[key] = env
	return env, nil
}

// compile is compiler.CompileCELExpression (compile.go), line for line but for env.Compile, done as
// its two steps (cel-go's Env.CompileSource: ParseSource, then Check unless parsing failed) so that
// compileReading can read the parsed expression.
func (c *templateCompiler) compile(expressionAccessor plugincel.ExpressionAccessor, options plugincel.OptionalVariableDeclarations, envType environment.Type) plugincel.CompilationResult {
	result, _ := c.compileReading(expressionAccessor, options, envType)
	return result
}

// compileReading is compile, and the facts of the expression (memo.go: what its syntax reads), read
// from the parsed expression before it is checked (zero facts when it does not parse).
func (c *templateCompiler) compileReading(expressionAccessor plugincel.ExpressionAccessor, options plugincel.OptionalVariableDeclarations, envType environment.Type) (plugincel.CompilationResult, facts) {
	var read facts
	result := c.compileWith(expressionAccessor, options, envType, func(parsed *cel.Ast) { read = factsOfParsed(parsed) })
	return result, read
}

func (c *templateCompiler) compileWith(expressionAccessor plugincel.ExpressionAccessor, options plugincel.OptionalVariableDeclarations, envType environment.Type, parsed func(*cel.Ast)) plugincel.CompilationResult {
	resultError := func(errorString string, errType apiservercel.ErrorType, cause error) plugincel.CompilationResult {
		return plugincel.CompilationResult{
			Error: &apiservercel.Error{
				Type:   errType,
				Detail: errorString,
				Cause:  cause,
			},
			ExpressionAccessor: expressionAccessor,
		}
	}

	envSet, err := c.env(options)
	if err != nil {
		return resultError(fmt.Sprintf("unexpected error loading CEL environment: %v", err), apiservercel.ErrorTypeInternal, nil)
	}
	env, err := envSet.Env(envType)
	if err != nil {
		return resultError(fmt.Sprintf("unexpected error loading CEL environment: %v", err), apiservercel.ErrorTypeInternal, nil)
	}

	// env.Compile(expression): CompileSource(common.NewTextSource(expression))
	ast, issues := env.ParseSource(common.NewTextSource(expressionAccessor.GetExpression()))
	if issues.Err() == nil {
		parsed(ast)
		ast, issues = env.Check(ast)
	}
	if issues != nil {
		return resultError("compilation failed: "+issues.String(), apiservercel.ErrorTypeInvalid, apiservercel.NewCompilationError(issues))
	}
	found := false
	returnTypes := expressionAccessor.ReturnTypes()
	for _, returnType := range returnTypes {
		if ast.OutputType().IsExactType(returnType) || cel.AnyType.IsExactType(returnType) {
			found = true
			break
		}
	}
	if !found {
		var reason string
		if len(returnTypes) == 1 {
			reason = fmt.Sprintf("must evaluate to %v but got %v", returnTypes[0].String(), ast.OutputType().String())
		} else {
			reason = fmt.Sprintf("must evaluate to one of %v but got %v", returnTypes, ast.OutputType().String())
		}

		return resultError(reason, apiservercel.ErrorTypeInvalid, nil)
	}

	_, err = cel.AstToCheckedExpr(ast)
	if err != nil {
		// should be impossible since env.Compile returned no issues
		return resultError("unexpected compilation error: "+err.Error(), apiservercel.ErrorTypeInternal, nil)
	}
	prog, err := env.Program(ast,
		cel.InterruptCheckFrequency(celconfig.CheckFrequency),
	)
	if err != nil {
		return resultError("program instantiation failed: "+err.Error(), apiservercel.ErrorTypeInternal, nil)
	}
	return plugincel.CompilationResult{
		Program:            prog,
		ExpressionAccessor: expressionAccessor,
		OutputType:         ast.OutputType(),
	}
}

// createEnvForOpts is compile.go's createEnvForOpts for the options Gatekeeper uses (neither an
// authorizer nor patch types).
func createEnvForOpts(baseEnv *environment.EnvSet, namespaceType *apiservercel.DeclType, requestType *apiservercel.DeclType, opts plugincel.OptionalVariableDeclarations) (*environment.EnvSet, error) {
	if opts.HasAuthorizer || opts.HasPatchTypes {
		return nil, fmt.Errorf("environment misconfigured: Gatekeeper declares no authorizer and no patch types")
	}
	var envOpts []cel.EnvOption
	envOpts = append(envOpts,
		cel.Variable(plugincel.ObjectVarName, cel.DynType),
		cel.Variable(plugincel.OldObjectVarName, cel.DynType),
		cel.Variable(plugincel.NamespaceVarName, namespaceType.CelType()),
		cel.Variable(plugincel.RequestVarName, requestType.CelType()))
	if opts.HasParams {
		envOpts = append(envOpts, cel.Variable(plugincel.ParamsVarName, cel.DynType))
	}

	extended, err := baseEnv.Extend(
		environment.VersionedOptions{
			// Feature epoch was actually 1.26, but we artificially set it to 1.0 because these
			// options should always be present.
			IntroducedVersion: version.MajorMinor(1, 0),
			EnvOptions:        envOpts,
			DeclTypes: []*apiservercel.DeclType{
				namespaceType,
				requestType,
			},
		},
		environment.StrictCostOpt,
	)
	if err != nil {
		return nil, fmt.Errorf("environment misconfigured: %w", err)
	}
	return extended, nil
}

// convertCelTypeToDeclType is composition.go's.
func convertCelTypeToDeclType(celType *cel.Type) *apiservercel.DeclType {
	if celType == nil {
		return apiservercel.DynType
	}
	switch celType {
	case cel.AnyType:
		return apiservercel.AnyType
	case cel.BoolType:
		return apiservercel.BoolType
	case cel.BytesType:
		return apiservercel.BytesType
	case cel.DoubleType:
		return apiservercel.DoubleType
	case cel.DurationType:
		return apiservercel.DurationType
	case cel.IntType:
		return apiservercel.IntType
	case cel.NullType:
		return apiservercel.NullType
	case cel.StringType:
		return apiservercel.StringType
	case cel.TimestampType:
		return apiservercel.TimestampType
	case cel.UintType:
		return apiservercel.UintType
	default:
		if celType.HasTrait(traits.ContainerType) && celType.HasTrait(traits.IndexerType) {
			parameters := celType.Parameters()
			switch len(parameters) {
			case 1:
				elemType := convertCelTypeToDeclType(parameters[0])
				return apiservercel.NewListType(elemType, -1)
			case 2:
				keyType := convertCelTypeToDeclType(parameters[0])
				valueType := convertCelTypeToDeclType(parameters[1])
				return apiservercel.NewMapType(keyType, valueType, -1)
			}
		}
		return apiservercel.DynType
	}
}
