// Package procs sets the Go runtime's processors (GOMAXPROCS) for a library that Python calls into,
// and says how many cores the process has for the goroutines of a batch (Cores).
//
// A Go collection's background marking is a quarter of GOMAXPROCS: with two processors (two cores, or
// a container's CPU limit of two or less, which Go takes as its default) that is no dedicated mark
// worker, only a fractional one and idle ones, and in a library whose processors are held only while a
// Python thread's call runs, no processor is idle for them: the mark phase lasts 16-18 ms of wall time
// and the requests that overlap it pay assists. With four processors one dedicated worker marks on its
// own thread: the phase lasts 7-8 ms and assists almost vanish, for the same CPU (docs/performance.md,
// "Where a review's tail latency comes from"). More processors than cores do not run more goroutines
// at once here: a call holds one processor, and Python's threads make the calls.
package procs

import (
	"os"
	"runtime"
)

// Minimum is the library's least GOMAXPROCS (one dedicated mark worker: Minimum / 4).
const Minimum = 4

// cores is Go's default GOMAXPROCS for the process (its CPUs, or its cgroup's CPU limit), or the
// environment's GOMAXPROCS, read before init raises it.
var cores = runtime.GOMAXPROCS(0)

// init raises GOMAXPROCS to Minimum unless the environment sets GOMAXPROCS.
func init() {
	if os.Getenv("GOMAXPROCS") == "" && cores < Minimum {
		runtime.GOMAXPROCS(Minimum)
	}
}

// Cores is how many goroutines a batch that keeps every core busy runs on: Go's default GOMAXPROCS
// (or the environment's), not the raised one.
func Cores() int { return cores }
