package mutation

import (
	"embed"
	"fmt"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"sigs.k8s.io/yaml"
)

// The mutators' CRDs as Gatekeeper v3.23.1 installs them (manifest_staging/charts/gatekeeper/crds of
// its module, byte for byte: crds_test.go compares them). A mutator document is read as the API server
// reads it through these CRDs - unknown fields pruned, defaults applied (ModifySet's `operation: merge`,
// external data's `failurePolicy` ...), the schema validated - before Gatekeeper's code sees it.
//
//go:embed crds/*.yaml
var crdFiles embed.FS

var crdFileNames = map[string]string{
	"Assign":         "crds/assign-customresourcedefinition.yaml",
	"AssignMetadata": "crds/assignmetadata-customresourcedefinition.yaml",
	"ModifySet":      "crds/modifyset-customresourcedefinition.yaml",
	"AssignImage":    "crds/assignimage-customresourcedefinition.yaml",
}

// servedVersion is one served version of a mutator kind: its structural schema (pruning, defaulting)
// and its schema validator, as the API server builds them from the CRD.
type servedVersion struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
}

var (
	crdsOnce sync.Once
	crdsErr  error
	served   map[string]map[string]*servedVersion // kind -> version -> schema
)

func loadCRDs() (map[string]map[string]*servedVersion, error) {
	crdsOnce.Do(func() {
		served = map[string]map[string]*servedVersion{}
		for kind, name := range crdFileNames {
			versions, err := readCRD(name)
			if err != nil {
				crdsErr = fmt.Errorf("the %s CRD (%s): %w", kind, name, err)
				return
			}
			served[kind] = versions
		}
	})
	return served, crdsErr
}

func readCRD(name string) (map[string]*servedVersion, error) {
	data, err := crdFiles.ReadFile(name)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		return nil, err
	}
	versions := map[string]*servedVersion{}
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		internal := &apiextensions.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
			return nil, err
		}
		s, err := structuralschema.NewStructural(internal)
		if err != nil {
			return nil, err
		}
		validator, _, err := apiservervalidation.NewSchemaValidator(internal)
		if err != nil {
			return nil, err
		}
		versions[v.Name] = &servedVersion{structural: s, validator: validator}
	}
	return versions, nil
}
