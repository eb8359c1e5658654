package mutation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ExpandOutput is what `gator expand` prints for these resultants (without the newline fmt.Println
// adds): sorted, each encoded in `format` ("", "yaml" or "json"), separated by "---" lines. It mirrors
// cmd/gator/expand/expand.go of Gatekeeper v3.23.1 (sortUnstructs, resourcesToString,
// resourcetoYAMLString, resourceToJSONString), whose functions are unexported. Each object is read as
// gator holds it (unstructured: integers as int64).
func ExpandOutput(objects []json.RawMessage, format string) (string, error) {
	resources := make([]*unstructured.Unstructured, 0, len(objects))
	for i, raw := range objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return "", fmt.Errorf("resultant %d: %w", i+1, err)
		}
		resources = append(resources, u)
	}
	sortKey := func(o *unstructured.Unstructured) string {
		return o.GetName() + o.GetAPIVersion() + o.GetKind()
	}
	sort.Slice(resources, func(i, j int) bool {
		return sortKey(resources[i]) > sortKey(resources[j])
	})
	var encode func(*unstructured.Unstructured) (string, error)
	switch format {
	case "", "yaml":
		encode = expandYAML
	case "json":
		encode = expandJSON
	default:
		return "", fmt.Errorf("unrecognized value for format flag: %s", format)
	}
	output := ""
	for i, r := range resources {
		text, err := encode(r)
		if err != nil {
			return "", err
		}
		output += text
		if i != len(resources)-1 {
			output += "---\n"
		}
	}
	return output, nil
}

func expandYAML(resource *unstructured.Unstructured) (string, error) {
	jsonb, err := json.Marshal(resource)
	if err != nil {
		return "", fmt.Errorf("pre-marshaling results to json: %w", err)
	}
	unmarshalled := map[string]interface{}{}
	if err := json.Unmarshal(jsonb, &unmarshalled); err != nil {
		return "", fmt.Errorf("pre-unmarshaling results from json: %w", err)
	}
	var b bytes.Buffer
	if err := yaml.NewEncoder(&b).Encode(unmarshalled); err != nil {
		return "", fmt.Errorf("marshaling validation yaml results: %w", err)
	}
	return b.String(), nil
}

func expandJSON(resource *unstructured.Unstructured) (string, error) {
	b, err := json.MarshalIndent(resource, "", "    ")
	if err != nil {
		return "", fmt.Errorf("marshaling validation json results: %w", err)
	}
	return string(b), nil
}
