package admissionpolicy

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/runtime/schema"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	utilopenapi "k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"

	discoveryfake "k8s.io/client-go/discovery/fake"
)

// The MutatingAdmissionPolicy plugin applies ApplyConfiguration patches with structured-merge-diff type
// converters it builds from the OpenAPI v3 documents the API server serves (patch.TypeConverterManager,
// fed by the discovery client's OpenAPIV3()). The same documents are built here by the API server's
// own code: the built-in kinds' from Kubernetes' generated OpenAPI definitions with kube-apiserver's
// OpenAPI v3 configuration (k8s.io/kubernetes/pkg/controlplane/apiserver/config.go, BuildGenericConfig),
// a custom kind's from its CRD by apiextensions-apiserver's builder (as its openapiv3 controller does).

// clientsetWithOpenAPI is the fake clientset whose discovery serves those documents.
type clientsetWithOpenAPI struct {
	*fake.Clientset
	openapi openapi.Client
}

func (c *clientsetWithOpenAPI) Discovery() discovery.DiscoveryInterface {
	return &discoveryWithOpenAPI{FakeDiscovery: c.Clientset.Discovery().(*discoveryfake.FakeDiscovery), openapi: c.openapi}
}

type discoveryWithOpenAPI struct {
	*discoveryfake.FakeDiscovery
	openapi openapi.Client
}

func (d *discoveryWithOpenAPI) OpenAPIV3() openapi.Client { return d.openapi }

type openAPIClient struct {
	r      *Resources
	once   sync.Once
	listed chan struct{} // closed once Paths was called (the plugin lists them as it starts)
}

func newOpenAPIClient(r *Resources) openapi.Client {
	return &openAPIClient{r: r, listed: make(chan struct{})}
}

// Paths lists a document per group version: the built-in ones and those of the CRDs given.
func (c *openAPIClient) Paths() (map[string]openapi.GroupVersion, error) {
	defer c.once.Do(func() { close(c.listed) })
	out := map[string]openapi.GroupVersion{}
	add := func(gv schema.GroupVersion) {
		path := "apis/" + gv.String()
		if gv.Group == "" {
			path = "api/" + gv.Version
		}
		out[path] = &groupVersionDoc{r: c.r, gv: gv}
	}
	for _, gv := range legacyscheme.Scheme.PrioritizedVersionsAllGroups() {
		add(gv)
	}
	c.r.mu.RLock()
	for gvk, m := range c.r.byKind {
		if m.custom {
			add(gvk.GroupVersion())
		}
	}
	c.r.mu.RUnlock()
	return out, nil
}

type groupVersionDoc struct {
	r  *Resources
	gv schema.GroupVersion
}

func (d *groupVersionDoc) ServerRelativeURL() string { return "/openapi/v3/" + d.gv.String() }

func (d *groupVersionDoc) Schema(contentType string) ([]byte, error) {
	if gvBuiltin(d.gv) {
		return builtinDocument(d.gv)
	}
	return d.r.customDocument(d.gv)
}

func gvBuiltin(gv schema.GroupVersion) bool {
	return len(legacyscheme.Scheme.KnownTypes(gv)) > 0
}

var (
	builtinDocsMu sync.Mutex
	builtinDocs   = map[schema.GroupVersion][]byte{}
)

// builtinDocument is the OpenAPI v3 document of a built-in group version: the models of its kinds and
// everything they refer to, named and built as kube-apiserver builds them.
func builtinDocument(gv schema.GroupVersion) ([]byte, error) {
	builtinDocsMu.Lock()
	defer builtinDocsMu.Unlock()
	if doc, ok := builtinDocs[gv]; ok {
		return doc, nil
	}
	config := genericapiserver.DefaultOpenAPIV3Config(
		utilopenapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(generatedopenapi.GetOpenAPIDefinitions),
		openapinamer.NewDefinitionNamer(legacyscheme.Scheme),
	)
	defs := config.GetDefinitions(func(string) spec.Ref { return spec.Ref{} })
	var names []string
	for _, t := range legacyscheme.Scheme.KnownTypes(gv) {
		name := util.ToRESTFriendlyName(t.PkgPath() + "." + t.Name())
		if _, ok := defs[name]; ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	schemas, err := builder3.BuildOpenAPIDefinitionsForResources(config, names...)
	if err != nil {
		return nil, fmt.Errorf("cannot build the OpenAPI document of %s: %w", gv, err)
	}
	doc := &spec3.OpenAPI{Version: "3.0.0", Components: &spec3.Components{Schemas: schemas}}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	builtinDocs[gv] = data
	return data, nil
}

// customDocument is the OpenAPI v3 document of a custom group version: its CRDs' kinds.
func (r *Resources) customDocument(gv schema.GroupVersion) ([]byte, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	merged := &spec3.OpenAPI{Version: "3.0.0", Components: &spec3.Components{Schemas: map[string]*spec.Schema{}}}
	found := false
	for gk, crd := range r.crds {
		if gk.Group != gv.Group {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name != gv.Version || !v.Served {
				continue
			}
			doc, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{V2: false})
			if err != nil {
				return nil, fmt.Errorf("cannot build the OpenAPI document of %s: %w", crd.Name, err)
			}
			if doc.Components != nil {
				for name, s := range doc.Components.Schemas {
					merged.Components.Schemas[name] = s
				}
			}
			found = true
		}
	}
	if !found {
		return nil, fmt.Errorf("no CustomResourceDefinition given for %s", gv)
	}
	return json.Marshal(merged)
}
