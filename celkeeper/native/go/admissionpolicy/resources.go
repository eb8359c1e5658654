package admissionpolicy

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
)

// builtinResources is the API server's discovery of its built-in resources (the resources, their kinds,
// scopes and subresources kube-apiserver serves at the library's Kubernetes version), written by
// hack/admissionpolicy/discovery.py from a real kube-apiserver.
//
//go:embed builtin_resources.json
var builtinResourcesJSON []byte

// Resource is one resource as discovery describes it.
type Resource struct {
	Group        string        `json:"group"`
	Version      string        `json:"version"`
	Resource     string        `json:"resource"`
	Kind         string        `json:"kind"`
	Namespaced   bool          `json:"namespaced"`
	Subresources []Subresource `json:"subresources,omitempty"`
}

// Subresource is a subresource and the kind its requests carry (e.g. deployments/scale: autoscaling/v1 Scale).
type Subresource struct {
	Name    string `json:"name"`
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

type mapping struct {
	resource   schema.GroupVersionResource
	namespaced bool
	custom     bool
	guessed    bool
}

// Resources maps kinds to resources as the API server serving them would: its built-in resources, the
// custom resources of the CRDs given, and (for other kinds) Kubernetes' own guess of a kind's resource.
type Resources struct {
	mu          sync.RWMutex
	byKind      map[schema.GroupVersionKind]mapping
	crds        map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition
	equivalents runtime.EquivalentResourceRegistry
	mapper      *meta.DefaultRESTMapper
}

var (
	builtinOnce sync.Once
	builtin     []Resource
	builtinErr  error
)

// Builtin is the embedded discovery of the built-in resources.
func Builtin() ([]Resource, error) {
	builtinOnce.Do(func() {
		builtinErr = json.Unmarshal(builtinResourcesJSON, &builtin)
	})
	return builtin, builtinErr
}

// NewResources maps the built-in resources.
func NewResources() *Resources {
	r := &Resources{
		byKind: map[schema.GroupVersionKind]mapping{},
		crds:   map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition{},
		mapper: meta.NewDefaultRESTMapper(nil),
	}
	r.equivalents = runtime.NewEquivalentResourceRegistryWithIdentity(storageKey)
	list, err := Builtin()
	if err != nil {
		panic(fmt.Sprintf("the embedded discovery does not parse: %v", err))
	}
	for _, res := range list {
		r.add(res, false, false)
	}
	return r
}

// storageKey says which resources share storage, hence are equivalent for matchPolicy Equivalent: the
// same group and resource in every version, and the resources kube-apiserver's storage factory makes
// cohabit (k8s.io/kubernetes/pkg/kubeapiserver/default_storage_factory_builder.go: events in the core
// group and in events.k8s.io).
func storageKey(gr schema.GroupResource) string {
	if gr.Resource == "events" && (gr.Group == "" || gr.Group == "events.k8s.io") {
		return "events"
	}
	return gr.String()
}

func (r *Resources) add(res Resource, custom, guessed bool) {
	gvr := schema.GroupVersionResource{Group: res.Group, Version: res.Version, Resource: res.Resource}
	gvk := schema.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: res.Kind}
	if _, known := r.byKind[gvk]; !known {
		r.byKind[gvk] = mapping{resource: gvr, namespaced: res.Namespaced, custom: custom, guessed: guessed}
	}
	scope := meta.RESTScopeRoot
	if res.Namespaced {
		scope = meta.RESTScopeNamespace
	}
	r.mapper.AddSpecific(gvk, gvr, gvr.GroupVersion().WithResource(strings.ToLower(res.Kind)), scope)
	r.equivalents.RegisterKindFor(gvr, "", gvk)
	for _, sub := range res.Subresources {
		r.equivalents.RegisterKindFor(gvr, sub.Name, schema.GroupVersionKind{Group: sub.Group, Version: sub.Version, Kind: sub.Kind})
	}
}

// AddCRD maps the custom resources of a CustomResourceDefinition (its served versions).
func (r *Resources) AddCRD(data []byte) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := utiljson.Unmarshal(data, crd); err != nil {
		return fmt.Errorf("not a CustomResourceDefinition: %w", err)
	}
	if crd.Spec.Names.Plural == "" || crd.Spec.Names.Kind == "" || crd.Spec.Group == "" {
		return fmt.Errorf("CustomResourceDefinition %q: spec.group, spec.names.plural and spec.names.kind are required", crd.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.crds[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		res := Resource{
			Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural, Kind: crd.Spec.Names.Kind,
			Namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		}
		if v.Subresources != nil && v.Subresources.Status != nil {
			res.Subresources = append(res.Subresources, Subresource{Name: "status", Group: res.Group, Version: res.Version, Kind: res.Kind})
		}
		if v.Subresources != nil && v.Subresources.Scale != nil {
			res.Subresources = append(res.Subresources, Subresource{Name: "scale", Group: "autoscaling", Version: "v1", Kind: "Scale"})
		}
		r.add(res, true, false)
	}
	return nil
}

// CRD is the CustomResourceDefinition given for a kind, if any.
func (r *Resources) CRD(gk schema.GroupKind) *apiextensionsv1.CustomResourceDefinition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.crds[gk]
}

// ResourceFor is the resource serving a kind and whether it is namespaced. A kind neither built in nor
// defined by a CRD given is guessed as Kubernetes guesses (meta.UnsafeGuessKindToResource), namespaced
// when namespacedHint says so; guessed says it was.
func (r *Resources) ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	m, ok := r.lookup(gvk)
	if !ok {
		return schema.GroupVersionResource{}, false, fmt.Errorf("no resource is known for %s", gvk)
	}
	return m.resource, m.namespaced, nil
}

func (r *Resources) lookup(gvk schema.GroupVersionKind) (mapping, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m, ok := r.byKind[gvk]
	return m, ok
}

// Guess maps a kind no CRD defines, as the API server would serve it if it had the kind's CRD with the
// resource Kubernetes guesses from the kind; namespaced as the objects seen of it are.
func (r *Resources) Guess(gvk schema.GroupVersionKind, namespaced bool) mapping {
	if m, ok := r.lookup(gvk); ok {
		return m
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.add(Resource{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Resource: plural.Resource, Namespaced: namespaced}, true, true)
	return r.byKind[gvk]
}

// IsBuiltin says whether the API server's scheme knows the kind (it decodes it to a typed object).
func IsBuiltin(gvk schema.GroupVersionKind) bool {
	return legacyscheme.Scheme.Recognizes(gvk)
}

// Mapper is the REST mapper the plugins resolve paramKind with.
func (r *Resources) Mapper() meta.RESTMapper { return lockedMapper{r} }

type lockedMapper struct{ r *Resources }

func (m lockedMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	m.r.mu.RLock()
	defer m.r.mu.RUnlock()
	return m.r.mapper.KindFor(resource)
}

func (m lockedMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	m.r.mu.RLock()
	defer m.r.mu.RUnlock()
	return m.r.mapper.KindsFor(resource)
}

func (m lockedMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	m.r.mu.RLock()
	defer m.r.mu.RUnlock()
	return m.r.mapper.ResourceFor(input)
}

func (m lockedMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	m.r.mu.RLock()
	defer m.r.mu.RUnlock()
	return m.r.mapper.ResourcesFor(input)
}

func (m lockedMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.r.mu.RLock()
	defer m.r.mu.RUnlock()
	return m.r.mapper.RESTMapping(gk, versions...)
}

func (m lockedMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	m.r.mu.RLock()
	defer m.r.mu.RUnlock()
	return m.r.mapper.RESTMappings(gk, versions...)
}

func (m lockedMapper) ResourceSingularizer(resource string) (string, error) {
	m.r.mu.RLock()
	defer m.r.mu.RUnlock()
	return m.r.mapper.ResourceSingularizer(resource)
}

// DynamicScheme is the scheme of the dynamic client holding custom parameter objects (unstructured).
func (r *Resources) DynamicScheme() *runtime.Scheme {
	return runtime.NewScheme()
}

// ListKinds is the list kind of every custom resource, for the dynamic client.
func (r *Resources) ListKinds() map[schema.GroupVersionResource]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := map[schema.GroupVersionResource]string{}
	for gvk, m := range r.byKind {
		if m.custom {
			out[m.resource] = gvk.Kind + "List"
		}
	}
	return out
}

// DecodeStored decodes an object as the API server would hold it once stored: a built-in kind strictly
// decoded and defaulted by its scheme, in the version given; any other kind as it is (unstructured; its
// mapping guessed when no CRD defines it).
func (r *Resources) DecodeStored(data []byte) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	gvk := u.GroupVersionKind()
	if IsBuiltin(gvk) {
		return decodeBuiltin(data, gvk.GroupVersion())
	}
	r.Guess(gvk, u.GetNamespace() != "")
	return u, nil
}

// ObjectInterfaces is what a request on a kind is decoded, converted and defaulted with: the API server's
// scheme for a built-in kind, and for a custom resource what its CRD handler uses (unstructured objects,
// converted between versions by changing apiVersion: the conversion strategy None).
func (r *Resources) ObjectInterfaces() admission.ObjectInterfaces {
	return &objectInterfaces{r: r}
}

type objectInterfaces struct{ r *Resources }

func (o *objectInterfaces) GetObjectCreater() runtime.ObjectCreater     { return creater{} }
func (o *objectInterfaces) GetObjectTyper() runtime.ObjectTyper         { return legacyscheme.Scheme }
func (o *objectInterfaces) GetObjectDefaulter() runtime.ObjectDefaulter { return legacyscheme.Scheme }
func (o *objectInterfaces) GetObjectConvertor() runtime.ObjectConvertor {
	return convertor{}
}
func (o *objectInterfaces) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return o.r.equivalents
}

// creater makes typed objects of built-in kinds and unstructured ones of the others.
type creater struct{}

func (creater) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	if IsBuiltin(kind) {
		return legacyscheme.Scheme.New(kind)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// convertor is the scheme's, and for unstructured objects of custom kinds the CRD handler's nop converter
// (k8s.io/apiextensions-apiserver/pkg/apiserver/conversion/nop_converter.go: same group, apiVersion set).
type convertor struct{}

func (convertor) Convert(in, out, context interface{}) error {
	uin, inOK := in.(*unstructured.Unstructured)
	uout, outOK := out.(*unstructured.Unstructured)
	if inOK && outOK && !IsBuiltin(uin.GroupVersionKind()) {
		gvk := uout.GroupVersionKind()
		uout.Object = runtime.DeepCopyJSON(uin.Object)
		if !gvk.Empty() {
			uout.SetGroupVersionKind(gvk)
		}
		return nil
	}
	return legacyscheme.Scheme.Convert(in, out, context)
}

func (convertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	if u, ok := in.(*unstructured.Unstructured); ok && !IsBuiltin(u.GroupVersionKind()) {
		gvk, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()})
		if !ok {
			return nil, fmt.Errorf("%s cannot be converted to %v", u.GroupVersionKind(), target)
		}
		out := u.DeepCopy()
		out.SetGroupVersionKind(gvk)
		return out, nil
	}
	return legacyscheme.Scheme.ConvertToVersion(in, target)
}

func (convertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return legacyscheme.Scheme.ConvertFieldLabel(gvk, label, value)
}

// Kinds lists the mapped kinds (for tests and the docs).
func (r *Resources) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.byKind))
	for gvk := range r.byKind {
		out = append(out, gvk.String())
	}
	sort.Strings(out)
	return out
}

// validatingObjects are the ObjectInterfaces of the validating phase: as the API server's, except that a
// built-in object is converted to the version a policy matches once per request, not once per policy, and
// handed to the plugin as the unstructured map its CEL activation makes of it
// (k8s.io/apiserver/pkg/admission/plugin/cel/activation.go converts the versioned object with
// runtime.DefaultUnstructuredConverter for every expression group of every policy: for a Deployment most
// of a request's time with a hundred policies). The map is the one that converter makes of the same typed
// object, apiVersion and kind set as admission.ConvertToGVK sets them; the validating plugin only reads it.
// The mutating phase keeps the typed objects (its patches are applied to them and defaulted).
type validatingObjects struct {
	objectInterfaces
	cache map[convertedKey]map[string]any
}

type convertedKey struct {
	in  runtime.Object
	gvk schema.GroupVersionKind
}

func (r *Resources) validatingObjectInterfaces() *validatingObjects {
	return &validatingObjects{objectInterfaces: objectInterfaces{r: r}, cache: map[convertedKey]map[string]any{}}
}

func (o *validatingObjects) GetObjectCreater() runtime.ObjectCreater { return unstructuredCreater{} }

func (o *validatingObjects) GetObjectConvertor() runtime.ObjectConvertor { return o }

// unstructuredCreater makes the unstructured objects validatingObjects converts into.
type unstructuredCreater struct{}

func (unstructuredCreater) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	if IsBuiltin(kind) && !legacyscheme.Scheme.Recognizes(kind) {
		return nil, fmt.Errorf("no kind %s is registered", kind)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

func (o *validatingObjects) Convert(in, out, context interface{}) error {
	u, ok := out.(*unstructured.Unstructured)
	obj, typed := in.(runtime.Object)
	if !ok || !typed {
		return convertor{}.Convert(in, out, context)
	}
	if _, isU := in.(*unstructured.Unstructured); isU {
		return convertor{}.Convert(in, out, context)
	}
	gvk := u.GroupVersionKind()
	key := convertedKey{obj, gvk}
	if m, ok := o.cache[key]; ok {
		u.Object = m
		return nil
	}
	versioned, err := legacyscheme.Scheme.New(gvk)
	if err != nil {
		return err
	}
	if err := legacyscheme.Scheme.Convert(in, versioned, context); err != nil {
		return err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(versioned)
	if err != nil {
		return err
	}
	o.cache[key] = m
	u.Object = m
	return nil
}

func (o *validatingObjects) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	return convertor{}.ConvertToVersion(in, target)
}

func (o *validatingObjects) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return convertor{}.ConvertFieldLabel(gvk, label, value)
}
