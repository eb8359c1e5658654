package mutation

import (
	"fmt"
	"strings"

	"github.com/open-policy-agent/gatekeeper/v3/apis"
	mutationsunversioned "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/path/parser"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Group is the API group of Gatekeeper's mutators.
const Group = "mutations.gatekeeper.sh"

// The scheme and deserializer Gatekeeper's webhooks decode mutators with (pkg/webhook/common.go:50-52,
// 87: every Gatekeeper API registered, with the conversions between its versions and the unversioned
// types its mutators are built from).
var (
	runtimeScheme = runtime.NewScheme()
	codecs        = serializer.NewCodecFactory(runtimeScheme)
	deserializer  = codecs.UniversalDeserializer()
)

func init() {
	if err := apis.AddToScheme(runtimeScheme); err != nil {
		panic(err)
	}
}

// Problem is one reason a mutator is refused: Field is the field path it concerns when known
// ("spec.location"), Message the judge's words (the API server's for the CRD's schema, Gatekeeper's for
// the rest).
type Problem struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Refused is a mutator document that the API server or Gatekeeper refuses, or that celkeeper cannot
// run (external data).
type Refused struct {
	Kind     string    `json:"kind,omitempty"`
	Name     string    `json:"name,omitempty"`
	Problems []Problem `json:"problems"`
}

func (r *Refused) Error() string {
	parts := make([]string, 0, len(r.Problems))
	for _, p := range r.Problems {
		if p.Field != "" {
			parts = append(parts, p.Field+": "+p.Message)
		} else {
			parts = append(parts, p.Message)
		}
	}
	who := strings.TrimSpace(r.Kind + " " + r.Name)
	if who == "" {
		return strings.Join(parts, "; ")
	}
	return who + ": " + strings.Join(parts, "; ")
}

func refuse(kind, name, fieldPath, format string, args ...any) *Refused {
	return &Refused{Kind: kind, Name: name, Problems: []Problem{{Field: fieldPath, Message: fmt.Sprintf(format, args...)}}}
}

// Load reads a mutator document (JSON) as Gatekeeper v3.23.1 gets it in a cluster: the API server
// reads it through the mutator's CRD (kind and version served, metadata validated, unknown fields
// refused as kubectl's default strict field validation has the API server refuse them, defaults applied,
// the schema validated; cluster-scoped: a namespace is dropped; a new object's
// generation is 1), Gatekeeper's validating webhook decodes it into its versioned type, converts it to
// the unversioned type and builds the mutator (pkg/webhook/policy.go validateAssign and siblings,
// pkg/controller/mutators/instances: the same conversion and constructor). A mutator that reads
// external data is refused: Gatekeeper's providers are out of reach of an in-process evaluation.
func Load(raw []byte) (types.Mutator, error) {
	var obj map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, refuse("", "", "", "the mutator is not a JSON object")
	}
	u := &unstructured.Unstructured{Object: obj}
	kind, apiVersion, name := u.GetKind(), u.GetAPIVersion(), u.GetName()
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, refuse(kind, name, "apiVersion", "%v", err)
	}
	crds, err := loadCRDs()
	if err != nil {
		return nil, err
	}
	version, ok := crds[kind][gv.Version]
	if gv.Group != Group || !ok {
		return nil, refuse(kind, name, "", "no matches for kind %q in version %q", kind, apiVersion)
	}

	// pkg/apiserver/customresource_handler.go (unstructuredDefaulter, schemaCoercingConverter) and
	// pkg/registry/customresource/validator.go, in the order the API server runs them.
	u.SetNamespace("")
	unknown := structuralpruning.PruneWithOptions(obj, version.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	if len(unknown) > 0 {
		r := &Refused{Kind: kind, Name: name}
		for _, path := range unknown {
			r.Problems = append(r.Problems, Problem{Field: path, Message: fmt.Sprintf("unknown field %q", path)})
		}
		return nil, r
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, version.structural)
	if ferr := schemaobjectmeta.Coerce(nil, obj, version.structural, false, true); ferr != nil {
		return nil, fieldProblems(kind, name, field.ErrorList{ferr})
	}
	structuraldefaulting.Default(obj, version.structural)
	var errs field.ErrorList
	errs = append(errs, apivalidation.ValidateObjectMetaAccessor(u, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, version.validator)...)
	if len(errs) > 0 {
		return nil, fieldProblems(kind, name, errs)
	}
	if u.GetGeneration() == 0 {
		u.SetGeneration(1)
	}
	// Gatekeeper's validating webhook refuses a long name before it looks at the mutator
	// (pkg/webhook/policy.go:369-373).
	if len(name) > 63 {
		return nil, refuse(kind, name, "metadata.name", "resource cannot have metadata.name larger than 63 char; length: %d", len(name))
	}

	data, err := u.MarshalJSON()
	if err != nil {
		return nil, refuse(kind, name, "", "%v", err)
	}
	typed, _, err := deserializer.Decode(data, nil, nil)
	if err != nil {
		return nil, refuse(kind, name, "", "%v", err)
	}
	m, err := build(kind, typed)
	if err != nil {
		if _, ok := err.(*Refused); ok {
			return nil, err
		}
		return nil, refuse(kind, name, fieldOf(obj, err), "%v", err)
	}
	return m, nil
}

// build converts the versioned mutator to Gatekeeper's unversioned type and builds its mutator
// (pkg/webhook/policy.go:496-562).
func build(kind string, typed runtime.Object) (types.Mutator, error) {
	switch kind {
	case "Assign":
		a := &mutationsunversioned.Assign{}
		if err := runtimeScheme.Convert(typed, a, nil); err != nil {
			return nil, err
		}
		m, err := mutators.MutatorForAssign(a)
		if err != nil {
			return nil, err
		}
		return m, refuseExternalData(kind, a.Name, a.Spec.Parameters.Assign.ExternalData)
	case "AssignMetadata":
		a := &mutationsunversioned.AssignMetadata{}
		if err := runtimeScheme.Convert(typed, a, nil); err != nil {
			return nil, err
		}
		m, err := mutators.MutatorForAssignMetadata(a)
		if err != nil {
			return nil, err
		}
		return m, refuseExternalData(kind, a.Name, a.Spec.Parameters.Assign.ExternalData)
	case "ModifySet":
		a := &mutationsunversioned.ModifySet{}
		if err := runtimeScheme.Convert(typed, a, nil); err != nil {
			return nil, err
		}
		return mutators.MutatorForModifySet(a)
	case "AssignImage":
		a := &mutationsunversioned.AssignImage{}
		if err := runtimeScheme.Convert(typed, a, nil); err != nil {
			return nil, err
		}
		return mutators.MutatorForAssignImage(a)
	}
	return nil, fmt.Errorf("unknown mutator kind %q", kind)
}

func refuseExternalData(kind, name string, ed *mutationsunversioned.ExternalData) error {
	if ed == nil {
		return nil
	}
	return refuse(kind, name, "spec.parameters.assign.externalData",
		"external data (provider %q) is not supported: Gatekeeper's external data providers cannot be called by celkeeper, so this mutator is not loaded", ed.Provider)
}

// fieldOf names the field a Gatekeeper error is about when it can be told for sure: a location that
// does not parse. Gatekeeper's other errors name what they concern in their own words.
func fieldOf(obj map[string]any, err error) string {
	location, _, _ := unstructured.NestedString(obj, "spec", "location")
	if _, perr := parser.Parse(location); perr != nil && strings.Contains(err.Error(), perr.Error()) {
		return "spec.location"
	}
	return ""
}

func fieldProblems(kind, name string, errs field.ErrorList) *Refused {
	r := &Refused{Kind: kind, Name: name}
	for _, e := range errs {
		r.Problems = append(r.Problems, Problem{Field: e.Field, Message: e.ErrorBody()})
	}
	return r
}

// LoadAsGator reads a mutator document as gator's expander reads one (pkg/gator/expand/expand.go of
// Gatekeeper v3.23.1: addMutator and its convert functions): converted from the document straight to
// Gatekeeper's unversioned type, without the CRD (no defaults, no pruning, no schema validation), then
// built by the same constructors. A mutator that reads external data is refused, as by Load.
func LoadAsGator(raw []byte) (types.Mutator, error) {
	var obj map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, refuse("", "", "", "the mutator is not a JSON object")
	}
	u := &unstructured.Unstructured{Object: obj}
	kind, name := u.GetKind(), u.GetName()
	var m types.Mutator
	var ed *mutationsunversioned.ExternalData
	var err error
	convert := func(into any) error { return runtime.DefaultUnstructuredConverter.FromUnstructured(obj, into) }
	switch kind {
	case "Assign":
		a := &mutationsunversioned.Assign{}
		if err = convert(a); err == nil {
			m, err = mutators.MutatorForAssign(a)
			ed = a.Spec.Parameters.Assign.ExternalData
		}
	case "AssignMetadata":
		a := &mutationsunversioned.AssignMetadata{}
		if err = convert(a); err == nil {
			m, err = mutators.MutatorForAssignMetadata(a)
			ed = a.Spec.Parameters.Assign.ExternalData
		}
	case "ModifySet":
		a := &mutationsunversioned.ModifySet{}
		if err = convert(a); err == nil {
			m, err = mutators.MutatorForModifySet(a)
		}
	case "AssignImage":
		a := &mutationsunversioned.AssignImage{}
		if err = convert(a); err == nil {
			m, err = mutators.MutatorForAssignImage(a)
		}
	default:
		return nil, refuse(kind, name, "", "cannot convert mutator of kind %q", kind)
	}
	if err != nil {
		return nil, refuse(kind, name, "", "%v", err)
	}
	if err := refuseExternalData(kind, name, ed); err != nil {
		return nil, err
	}
	return m, nil
}
