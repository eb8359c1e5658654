// Command vapgen runs Gatekeeper v3.23.1's own ValidatingAdmissionPolicy transform, the reference that
// celkeeper's generator (celkeeper/vap) is compared with in tests/vap/test_transform_gatekeeper.py.
//
// stdin: {"cases": [case, ...]} where a case is one of
//
//	{"id": "...", "template": {...ConstraintTemplate...}, "scope": {"webhook": {...}|null,
//	 "excluded": [...], "exempted": [...]}, "defaultGenerateVAP": true|false}
//	{"id": "...", "constraint": {...constraint...}, "defaultGenerateVAPB": true|false}
//
// stdout: {"results": [{"id", "generate", "object", "error"}, ...]}: for a template, whether
// Gatekeeper would generate its VAP (constraint.ShouldGenerateVAP) and the ValidatingAdmissionPolicy
// as its constraint template controller sends it (transform.TemplateToPolicyDefinitionWithWebhookConfig,
// then the v1beta1 -> v1 conversion); for a constraint, whether a binding is generated and the
// ValidatingAdmissionPolicyBinding (transform.ConstraintToBinding with the actions of the constraint
// controller's shouldGenerateVAPB). "error" is the transform's error text ("" when none); with
// Gatekeeper's operation-mismatch warning the object is still returned, as the controller keeps it.
//
// Owner references and the metadata the controllers set are not part of the transform and not output.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/open-policy-agent/frameworks/constraint/pkg/apis"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/controller/constraint"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/controller/webhookconfig/webhookconfigcache"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel/transform"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/reader"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

type scope struct {
	Webhook  *webhookconfigcache.WebhookMatchingConfig `json:"webhook"`
	Excluded []string                                  `json:"excluded"`
	Exempted []string                                  `json:"exempted"`
}

type input struct {
	ID                  string                 `json:"id"`
	Template            map[string]interface{} `json:"template"`
	Constraint          map[string]interface{} `json:"constraint"`
	Scope               *scope                 `json:"scope"`
	DefaultGenerateVAP  *bool                  `json:"defaultGenerateVAP"`
	DefaultGenerateVAPB *bool                  `json:"defaultGenerateVAPB"`
}

type output struct {
	ID       string      `json:"id"`
	Generate bool        `json:"generate"`
	Object   interface{} `json:"object"`
	Error    string      `json:"error"`
}

func main() {
	var in struct {
		Cases []input `json:"cases"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "vapgen: cannot read the cases:", err)
		os.Exit(2)
	}
	scheme := runtime.NewScheme()
	if err := apis.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, "vapgen:", err)
		os.Exit(2)
	}
	results := make([]output, 0, len(in.Cases))
	for _, c := range in.Cases {
		var out output
		switch {
		case c.Template != nil:
			out = templateCase(scheme, c)
		case c.Constraint != nil:
			out = constraintCase(c)
		default:
			out = output{Error: "a case needs a template or a constraint"}
		}
		out.ID = c.ID
		results = append(results, out)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]interface{}{"results": results}); err != nil {
		fmt.Fprintln(os.Stderr, "vapgen:", err)
		os.Exit(2)
	}
}

// toV1 converts Gatekeeper's v1beta1 object to the v1 one its controllers write (the API server serves
// ValidatingAdmissionPolicy v1 since Kubernetes 1.30). Their v1beta1ToV1 functions copy the fields
// one by one; the JSON of the two API versions is the same for every field they copy. The v1 object is
// returned as Go writes it (keys in struct order; metadata.creationTimestamp null, an empty status).
func toV1(v1beta1 interface{}, v1 interface{}) (interface{}, error) {
	data, err := json.Marshal(v1beta1)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, v1); err != nil {
		return nil, err
	}
	data, err = json.Marshal(v1)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(data), nil
}

func templateCase(scheme *runtime.Scheme, c input) output {
	u := &unstructured.Unstructured{Object: c.Template}
	ct, err := reader.ToTemplate(scheme, u)
	if err != nil {
		return output{Error: "reading the template: " + err.Error()}
	}
	if c.DefaultGenerateVAP != nil {
		constraint.SetDefaultGenerateVAP(*c.DefaultGenerateVAP)
	}
	out := output{}
	generate, err := constraint.ShouldGenerateVAP(ct)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Generate = generate
	s := scope{}
	if c.Scope != nil {
		s = *c.Scope
	}
	policy, err := transform.TemplateToPolicyDefinitionWithWebhookConfig(ct, s.Webhook, s.Excluded, s.Exempted)
	if err != nil {
		out.Error = err.Error()
		if policy == nil || !errors.Is(err, transform.ErrOperationMismatch) {
			return out
		}
	}
	policy.TypeMeta.APIVersion = admissionregistrationv1.SchemeGroupVersion.String()
	policy.TypeMeta.Kind = "ValidatingAdmissionPolicy"
	obj, convErr := toV1(policy, &admissionregistrationv1.ValidatingAdmissionPolicy{})
	if convErr != nil {
		out.Error = convErr.Error()
		return out
	}
	out.Object = obj
	return out
}

// constraintCase mirrors the constraint controller's shouldGenerateVAPB (unexported) with the exported
// helpers it calls: scoped constraints take the actions listed for vap.k8s.io (or *), others their
// enforcement action when --default-create-vap-binding-for-constraints is on.
func constraintCase(c input) output {
	u := &unstructured.Unstructured{Object: c.Constraint}
	defaultVAPB := true
	if c.DefaultGenerateVAPB != nil {
		defaultVAPB = *c.DefaultGenerateVAPB
	}
	action, err := util.GetEnforcementAction(u.Object)
	if err != nil {
		return output{Error: err.Error()}
	}
	var actions []string
	if action == util.Scoped {
		actions, err = util.ScopedActionForEP(util.VAPEnforcementPoint, u)
		if err != nil {
			return output{Error: err.Error()}
		}
	} else if defaultVAPB {
		actions = []string{string(action)}
	}
	out := output{Generate: len(actions) != 0}
	if !out.Generate {
		return out
	}
	binding, err := transform.ConstraintToBinding(u, actions)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	binding.TypeMeta.APIVersion = admissionregistrationv1.SchemeGroupVersion.String()
	binding.TypeMeta.Kind = "ValidatingAdmissionPolicyBinding"
	obj, err := toV1(binding, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{})
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Object = obj
	return out
}
