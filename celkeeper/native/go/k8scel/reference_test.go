package k8scel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/open-policy-agent/frameworks/constraint/pkg/client/reviews"
	templates "github.com/open-policy-agent/frameworks/constraint/pkg/core/templates"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The oracle of these tests is Gatekeeper's own CEL driver (k8scel.Driver, v3.23.1): AddTemplate and
// Query exactly as gator and the Gatekeeper webhook call them.

type gatekeeperReview struct{ request *admissionv1.AdmissionRequest }

func (r *gatekeeperReview) GetAdmissionRequest() *admissionv1.AdmissionRequest { return r.request }

// gatekeeper is Gatekeeper's driver holding some templates by name.
type gatekeeper struct{ driver *k8scel.Driver }

func newGatekeeper(t testing.TB) *gatekeeper {
	d, err := k8scel.New()
	if err != nil {
		t.Fatal(err)
	}
	return &gatekeeper{driver: d}
}

func (g *gatekeeper) addTemplate(name string, source map[string]any) error {
	ct := &templates.ConstraintTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: templates.ConstraintTemplateSpec{Targets: []templates.Target{{
			Target: "admission.k8s.gatekeeper.sh",
			Code:   []templates.Code{{Engine: "K8sNativeValidation", Source: &templates.Anything{Value: source}}},
		}}},
	}
	return g.driver.AddTemplate(context.Background(), ct)
}

// query is Driver.Query for one constraint: the messages of its violations.
func (g *gatekeeper) query(header, object, oldObject []byte, namespace map[string]any, constraint *unstructured.Unstructured) ([]string, error) {
	req := &admissionv1.AdmissionRequest{}
	if err := json.Unmarshal(header, req); err != nil {
		return nil, err
	}
	req.Object.Raw, req.OldObject.Raw = object, oldObject
	var opts []reviews.ReviewOpt
	if namespace != nil {
		opts = append(opts, reviews.Namespace(namespace))
	}
	resp, err := g.driver.Query(context.Background(), "admission.k8s.gatekeeper.sh",
		[]*unstructured.Unstructured{constraint}, &gatekeeperReview{req}, opts...)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range resp.Results {
		out = append(out, r.Msg)
	}
	return out, nil
}

// ours is this package's path for one constraint: the messages of its deny decisions.
func ours(tmpl *Template, header, object, oldObject, namespace []byte, c *Constraint) ([]string, error) {
	r, err := NewRequest(header, object, oldObject, namespace)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range tmpl.Validate(context.Background(), r, c, PerCallLimit) {
		if d.Action == "deny" {
			out = append(out, d.Message)
		}
	}
	return out, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func describe(messages []string, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("%q", messages)
}

func sameAnswers(a []string, aerr error, b []string, berr error) bool {
	if (aerr != nil) != (berr != nil) {
		return false
	}
	if aerr != nil {
		return aerr.Error() == berr.Error()
	}
	return strings.Join(a, "\x00") == strings.Join(b, "\x00") && len(a) == len(b)
}

func decodeHeader(t testing.TB, header []byte) *admissionv1.AdmissionRequest {
	req := &admissionv1.AdmissionRequest{}
	if err := json.Unmarshal(header, req); err != nil {
		t.Fatal(err)
	}
	return req
}

func reviewNamespace(ns map[string]any) reviews.ReviewOpt { return reviews.Namespace(ns) }
