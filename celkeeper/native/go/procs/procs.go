// Package procs sets the Go runtime's processors (GOMAXPROCS) for a library that Python calls into,
// says how many cores the process has for the goroutines of a batch (Cores), and runs a batch on them
// (Each).
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
	"sync"
	"sync/atomic"
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

// Each calls f(i) for every i in [0, n), on Cores() goroutines at once (fewer for a smaller n), and
// returns once every call has. Each goroutine takes the next i itself: the caller, often a thread of
// Python's locked to its goroutine by cgo, is not woken to hand out each one (a channel fed by it left
// the workers idle 30-50% of a batch of admission-policy reviews, waiting for that thread to be given a
// core again).
func Each(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(Cores(), n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}
