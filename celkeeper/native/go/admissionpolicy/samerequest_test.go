package admissionpolicy

import (
	"reflect"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	admissioncel "k8s.io/apiserver/pkg/admission/plugin/cel"
)

// The copy of k8s.io/apiserver's plugin/cel/activation.go shares the `request` variable's map between the
// policies of a request whose AdmissionRequests are reflect.DeepEqual, compared by SameValue: it must say
// what DeepEqual says, for requests differing in any one field, nil or empty.
func TestSameValueIsDeepEqualForAdmissionRequests(t *testing.T) {
	yes := true
	no := false
	options := &metav1.CreateOptions{FieldManager: "m"}
	base := func() *admissionv1.AdmissionRequest {
		return &admissionv1.AdmissionRequest{
			UID:             "u",
			Kind:            metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Resource:        metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
			RequestKind:     &metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			RequestResource: &metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
			Name:            "web", Namespace: "demo", Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: "u", Groups: []string{"a", "b"}},
			DryRun:   &no,
			Options:  runtime.RawExtension{Object: options},
		}
	}
	changes := map[string]func(*admissionv1.AdmissionRequest){
		"nothing":             func(*admissionv1.AdmissionRequest) {},
		"uid":                 func(r *admissionv1.AdmissionRequest) { r.UID = "v" },
		"kind":                func(r *admissionv1.AdmissionRequest) { r.Kind.Version = "v2" },
		"resource":            func(r *admissionv1.AdmissionRequest) { r.Resource.Resource = "x" },
		"subresource":         func(r *admissionv1.AdmissionRequest) { r.SubResource = "status" },
		"request kind":        func(r *admissionv1.AdmissionRequest) { r.RequestKind.Kind = "X" },
		"request kind nil":    func(r *admissionv1.AdmissionRequest) { r.RequestKind = nil },
		"request resource":    func(r *admissionv1.AdmissionRequest) { r.RequestResource = &metav1.GroupVersionResource{} },
		"request subresource": func(r *admissionv1.AdmissionRequest) { r.RequestSubResource = "scale" },
		"name":                func(r *admissionv1.AdmissionRequest) { r.Name = "api" },
		"namespace":           func(r *admissionv1.AdmissionRequest) { r.Namespace = "" },
		"operation":           func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Update },
		"username":            func(r *admissionv1.AdmissionRequest) { r.UserInfo.Username = "w" },
		"user uid":            func(r *admissionv1.AdmissionRequest) { r.UserInfo.UID = "1" },
		"groups":              func(r *admissionv1.AdmissionRequest) { r.UserInfo.Groups = []string{"a"} },
		"groups order":        func(r *admissionv1.AdmissionRequest) { r.UserInfo.Groups = []string{"b", "a"} },
		"groups nil":          func(r *admissionv1.AdmissionRequest) { r.UserInfo.Groups = nil },
		"groups empty":        func(r *admissionv1.AdmissionRequest) { r.UserInfo.Groups = []string{} },
		"extra": func(r *admissionv1.AdmissionRequest) {
			r.UserInfo.Extra = map[string]authenticationv1.ExtraValue{"k": {"v"}}
		},
		"extra empty":        func(r *admissionv1.AdmissionRequest) { r.UserInfo.Extra = map[string]authenticationv1.ExtraValue{} },
		"dry run":            func(r *admissionv1.AdmissionRequest) { r.DryRun = &yes },
		"dry run same value": func(r *admissionv1.AdmissionRequest) { v := false; r.DryRun = &v },
		"dry run nil":        func(r *admissionv1.AdmissionRequest) { r.DryRun = nil },
		"options nil":        func(r *admissionv1.AdmissionRequest) { r.Options.Object = nil },
		"options equal copy": func(r *admissionv1.AdmissionRequest) { r.Options.Object = options.DeepCopy() },
		"options other":      func(r *admissionv1.AdmissionRequest) { r.Options.Object = &metav1.CreateOptions{} },
		"options raw":        func(r *admissionv1.AdmissionRequest) { r.Options.Raw = []byte("{}") },
		"options raw empty":  func(r *admissionv1.AdmissionRequest) { r.Options.Raw = []byte{} },
		"object":             func(r *admissionv1.AdmissionRequest) { r.Object.Raw = []byte(`{"a":1}`) },
		"old object":         func(r *admissionv1.AdmissionRequest) { r.OldObject.Object = options },
	}
	differ := 0
	for name, change := range changes {
		for _, first := range []*admissionv1.AdmissionRequest{base(), base().DeepCopy()} {
			other := base()
			change(other)
			for _, pair := range [][2]*admissionv1.AdmissionRequest{{first, other}, {other, first}} {
				want := reflect.DeepEqual(pair[0], pair[1])
				if got := admissioncel.SameValue(pair[0], pair[1]); got != want {
					t.Errorf("%s: SameValue %v, DeepEqual %v", name, got, want)
				}
				if !want {
					differ++
				}
			}
		}
	}
	if differ == 0 {
		t.Error("no change made the requests differ")
	}
	ns := &metav1.ObjectMeta{Name: "n"}
	if !admissioncel.SameValue(ns, ns.DeepCopy()) || admissioncel.SameValue(ns, &metav1.ObjectMeta{Name: "m"}) {
		t.Error("SameValue is not DeepEqual for other values")
	}
}
