"""celkeeper's native core: one Go shared library (celkeeper/native/go), built by setup.py and called
through one module (`ffi`). Each capability is a folder of the Go module and a Python package that
builds on `ffi`: k8scel (Kubernetes' CEL as Gatekeeper runs it) is the cel-go engine, `celkeeper.cel.celgo`.
"""
