package engine

import (
	"os"
	"runtime/debug"
)

// GCPercent is the library's GOGC: a decision allocates many short-lived values (CEL's values of the
// request's data, the interpreter's own): collecting less often than Go's default (100) saves a
// quarter of the CPU per decision, for a heap that may grow to five times what is live (compiled
// templates and constraints) between collections. At 400 the collector takes ~1% of a decision's
// CPU in process (GODEBUG=gctrace=1 under bench/decision.py): a higher value gains nothing more.
const GCPercent = 400

// SetGCPercent sets GCPercent unless the environment sets GOGC (the library at load; the Go
// benchmarks, so that their figures are the library's).
func SetGCPercent() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
}
