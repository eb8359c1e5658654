"""The cel-go engine: Kubernetes' own CEL (cel-go, k8s.io/apiserver), exactly as Gatekeeper v3.23.1
runs it: the k8scel capability of celkeeper's native library (celkeeper/native/go/k8scel, called
through celkeeper.native.ffi), driven by `engine`."""
