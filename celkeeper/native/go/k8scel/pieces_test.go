package k8scel

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
)

func BenchmarkPieceHeader(b *testing.B) {
	loopCPU(b, func() {
		req := &admissionv1.AdmissionRequest{}
		_ = json.Unmarshal(benchHeader, req)
	})
}
func BenchmarkPieceObject(b *testing.B) {
	object := mustJSON(benchPod())
	loopCPU(b, func() { _, _ = decodeObject(object) })
}
func BenchmarkPieceAttr(b *testing.B) {
	req := &admissionv1.AdmissionRequest{}
	_ = json.Unmarshal(benchHeader, req)
	req.Object = runtime.RawExtension{Raw: mustJSON(benchPod())}
	loopCPU(b, func() { _, _ = versionedAttributes(req, nil) })
}
func BenchmarkPieceRequestVal(b *testing.B) {
	req := &admissionv1.AdmissionRequest{}
	_ = json.Unmarshal(benchHeader, req)
	attr, _ := versionedAttributes(req, nil)
	loopCPU(b, func() {
		ar := plugincel.CreateAdmissionRequest(attr.Attributes, metav1.GroupVersionResource(attr.GetResource()), metav1.GroupVersionKind(attr.VersionedKind))
		_, _ = runtime.DefaultUnstructuredConverter.ToUnstructured(ar)
	})
}
func BenchmarkPieceNewRequest(b *testing.B) {
	object := mustJSON(benchPod())
	ns := mustJSON(benchNamespace)
	loopCPU(b, func() { _, _ = NewRequest(benchHeader, object, nil, ns) })
}
