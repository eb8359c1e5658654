package k8scel

import (
	"os"
	"runtime/debug"
)

// GCPercent is the library's GOGC: a decision allocates many short-lived values (CEL's values of the
// request's data, the interpreter's own): collecting less often than Go's default (100) saves a
// quarter of the CPU per decision, for a heap that may grow to five times what is live (compiled
// templates and constraints) between collections. Measured at 400 (GODEBUG=gctrace=1 under
// bench/engine_workload.py webhook, 12-02, loaded machine): one collection per ~135 decisions (7 MB
// live), ~3 ms of assist and background marking each (~4% of a decision's CPU), plus ~6 ms of idle
// mark workers when a core is idle (a single caller; a loaded server has none idle).
const GCPercent = 400

// SetGCPercent sets GCPercent unless the environment sets GOGC (the library at load; the Go
// benchmarks, so that their figures are the library's).
func SetGCPercent() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
}
