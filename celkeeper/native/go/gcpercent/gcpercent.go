// Package gcpercent sets the library's GOGC (GCPercent) as the library loads, before the packages it
// imports initialise: its only imports are the standard library's os and runtime/debug, so Go (which
// initialises a package as soon as its imports are, the first by import path among those ready) runs
// its init before any of Kubernetes', cel-go's or Gatekeeper's. Their package initialisation allocates
// ~12 MB (schemes, OpenAPI models, protobuf registries; ~5 MB stays live): at Go's default GOGC (100,
// a first heap goal of 4 MB) that is three collections while the library loads, ~13 ms of the ~53 ms
// of CPU a load costs (GODEBUG=gctrace=1; measured 12-05: load and first call 53 -> 40 ms median of 9,
// the peak RSS 2 MB higher). At GCPercent none runs before the first template compiles.
package gcpercent

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

func init() { Set() }

// Set sets GCPercent unless the environment sets GOGC.
func Set() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
}
