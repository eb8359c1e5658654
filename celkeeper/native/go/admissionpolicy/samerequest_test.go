package admissionpolicy

import (
	"reflect"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
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
	sameValueIsDeepEqual(t, base, (*admissionv1.AdmissionRequest).DeepCopy, changes)
	ns := &metav1.ObjectMeta{Name: "n"}
	if !admissioncel.SameValue(ns, ns.DeepCopy()) || admissioncel.SameValue(ns, &metav1.ObjectMeta{Name: "m"}) {
		t.Error("SameValue is not DeepEqual for other values")
	}
}

// The copy's ActivationCache shares the `namespaceObject` variable's map between the policies of a request
// and between requests (the set's NamespaceMaps) for Namespaces SameValue finds reflect.DeepEqual: it must
// say what DeepEqual says for Namespaces as the plugin makes them (CreateNamespaceObject) differing in any
// one field, nil or empty, or in fields CreateNamespaceObject leaves out.
func TestSameValueIsDeepEqualForNamespaces(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC))
	deleted := metav1.NewTime(created.Add(time.Hour))
	grace := int64(30)
	base := func() *corev1.Namespace {
		return admissioncel.CreateNamespaceObject(&corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{
				Name: "demo", UID: "u", ResourceVersion: "7", Generation: 1, CreationTimestamp: created,
				Labels:      map[string]string{"kubernetes.io/metadata.name": "demo", "team": "a"},
				Annotations: map[string]string{"note": "x"},
				Finalizers:  []string{"f"},
			},
			Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
		})
	}
	changes := map[string]func(*corev1.Namespace){
		"nothing":             func(*corev1.Namespace) {},
		"type meta":           func(n *corev1.Namespace) { n.Kind = "Namespace" },
		"name":                func(n *corev1.Namespace) { n.Name = "other" },
		"generate name":       func(n *corev1.Namespace) { n.GenerateName = "d-" },
		"namespace":           func(n *corev1.Namespace) { n.Namespace = "x" },
		"self link":           func(n *corev1.Namespace) { n.SelfLink = "/x" },
		"uid":                 func(n *corev1.Namespace) { n.UID = "v" },
		"resource version":    func(n *corev1.Namespace) { n.ResourceVersion = "8" },
		"generation":          func(n *corev1.Namespace) { n.Generation = 2 },
		"created":             func(n *corev1.Namespace) { n.CreationTimestamp = deleted },
		"created, other zone": func(n *corev1.Namespace) { n.CreationTimestamp = metav1.NewTime(created.In(time.FixedZone("z", 0))) },
		"deleted":             func(n *corev1.Namespace) { n.DeletionTimestamp = &deleted },
		"deleted, same time":  func(n *corev1.Namespace) { d := deleted; n.DeletionTimestamp = &d },
		"grace":               func(n *corev1.Namespace) { n.DeletionGracePeriodSeconds = &grace },
		"label value": func(n *corev1.Namespace) {
			n.Labels = map[string]string{"kubernetes.io/metadata.name": "demo", "team": "b"}
		},
		"label added": func(n *corev1.Namespace) {
			n.Labels = map[string]string{"kubernetes.io/metadata.name": "demo", "team": "a", "x": ""}
		},
		"labels equal copy": func(n *corev1.Namespace) {
			n.Labels = map[string]string{"kubernetes.io/metadata.name": "demo", "team": "a"}
		},
		"labels nil":            func(n *corev1.Namespace) { n.Labels = nil },
		"labels empty":          func(n *corev1.Namespace) { n.Labels = map[string]string{} },
		"annotations nil":       func(n *corev1.Namespace) { n.Annotations = nil },
		"annotation other key":  func(n *corev1.Namespace) { n.Annotations = map[string]string{"other": "x"} },
		"owner references":      func(n *corev1.Namespace) { n.OwnerReferences = []metav1.OwnerReference{{Name: "o"}} },
		"owner references none": func(n *corev1.Namespace) { n.OwnerReferences = []metav1.OwnerReference{} },
		"finalizers":            func(n *corev1.Namespace) { n.Finalizers = []string{"g"} },
		"finalizers empty":      func(n *corev1.Namespace) { n.Finalizers = []string{} },
		"managed fields":        func(n *corev1.Namespace) { n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}} },
		"spec finalizers nil":   func(n *corev1.Namespace) { n.Spec.Finalizers = nil },
		"spec finalizers other": func(n *corev1.Namespace) { n.Spec.Finalizers = []corev1.FinalizerName{"x"} },
		"phase":                 func(n *corev1.Namespace) { n.Status.Phase = corev1.NamespaceTerminating },
		"conditions": func(n *corev1.Namespace) {
			n.Status.Conditions = []corev1.NamespaceCondition{{Type: corev1.NamespaceDeletionContentFailure}}
		},
		"conditions empty": func(n *corev1.Namespace) { n.Status.Conditions = []corev1.NamespaceCondition{} },
	}
	sameValueIsDeepEqual(t, base, (*corev1.Namespace).DeepCopy, changes)
	// The fields the comparison knows; a field Kubernetes adds makes this fail, to be compared too.
	known := map[reflect.Type][]string{
		reflect.TypeFor[corev1.Namespace](): {"TypeMeta", "ObjectMeta", "Spec", "Status"},
		reflect.TypeFor[metav1.ObjectMeta](): {"Name", "GenerateName", "Namespace", "SelfLink", "UID", "ResourceVersion",
			"Generation", "CreationTimestamp", "DeletionTimestamp", "DeletionGracePeriodSeconds", "Labels", "Annotations",
			"OwnerReferences", "Finalizers", "ManagedFields"},
		reflect.TypeFor[metav1.TypeMeta]():        {"Kind", "APIVersion"},
		reflect.TypeFor[corev1.NamespaceSpec]():   {"Finalizers"},
		reflect.TypeFor[corev1.NamespaceStatus](): {"Phase", "Conditions"},
	}
	for typ, fields := range known {
		var got []string
		for i := range typ.NumField() {
			got = append(got, typ.Field(i).Name)
		}
		if !reflect.DeepEqual(got, fields) {
			t.Errorf("%s has the fields %v; SameValue compares %v", typ, got, fields)
		}
	}
}

// sameValueIsDeepEqual checks that SameValue says what reflect.DeepEqual says of base() (or its copy) and
// base() changed by each of changes, both ways round; and that some change makes them differ.
func sameValueIsDeepEqual[T any](t *testing.T, base func() T, copyOf func(T) T, changes map[string]func(T)) {
	t.Helper()
	differ := 0
	for name, change := range changes {
		for _, first := range []T{base(), copyOf(base())} {
			other := base()
			change(other)
			for _, pair := range [][2]T{{first, other}, {other, first}} {
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
		t.Error("no change made the values differ")
	}
}
