// Command native is celkeeper's native core as a C shared library (go build -buildmode=c-shared),
// loaded by celkeeper/native/ffi.py with ctypes, the one Python module that calls it. Each capability
// is one folder of this module and one file of exports here (export_<folder>.go):
//
//	k8scel/           Kubernetes' CEL as Gatekeeper's K8sNativeValidation driver runs it (export_k8scel.go)
//	mutation/         Gatekeeper's mutation system (export_mutation.go)
//	admissionpolicy/  Kubernetes' ValidatingAdmissionPolicy and MutatingAdmissionPolicy plugins (export_admissionpolicy.go)
//
// It is built twice (celkeeper/native/locate.py): with every capability (libcelkeeper.so), and with
// Gatekeeper's alone (`-tags gatekeeper_only`, libcelkeeper-gatekeeper.so: no admissionpolicy, whose
// dependencies — the API server's scheme, storage and OpenAPI packages — initialise ~4 MB of heap that
// stays live in every process that loads them). A process that evaluates no admission policy (a webhook
// worker without --enforce-admission-policies) loads the second.
//
// Every call takes and returns JSON (or raw JSON parts); results are malloc'ed buffers the caller frees
// with native_free. What a call compiles or binds lives here, named by a handle (a positive integer)
// until native_release.
//
// The Go runtime does not survive fork(): load this library only in a process that will not fork
// (celkeeper loads it lazily, in each worker after the fork).
package main

/*
#include <stdlib.h>
#include <stdint.h>
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
	"unsafe"

	// the library's GOGC, set before the packages below initialise (see the package)
	_ "celkeeper.local/native/gcpercent"
	// the library's GOMAXPROCS (see the package)
	_ "celkeeper.local/native/procs"
	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/klog/v2"
)

func main() {}

// memoryLimitRatio is the share of the memory limit of the process's cgroup (a container's limit, as
// Kubernetes sets it, cgroup v1 or v2) this Go runtime takes as its soft memory limit (GOMEMLIMIT):
// past it the collector runs whatever GOGC says, so that the garbage GOGC lets accumulate (gcpercent/gcpercent.go)
// never takes a container over its limit. A webhook pod holds two Go runtimes (the worker's, the
// informer's; three while a worker is replaced) beside Python's heaps. GOMEMLIMIT or AUTOMEMLIMIT (a
// ratio, or "off") in the environment decide instead; without a cgroup limit there is none.
const memoryLimitRatio = 0.35

func init() {
	// Kubernetes' code logs through klog (the API server's plugins and informers: syncs, policy
	// refreshes): in a library called by celkeeper's tools that would be noise on their standard error.
	// Decisions come back in the replies.
	klog.SetLogger(logr.Discard())
	_, _ = memlimit.Set(memlimit.WithRatio(memoryLimitRatio), memlimit.WithProvider(memlimit.FromCgroup))
}

// runtimeFigures are the Go runtime's settings and memory now (runtime/metrics): its soft memory limit
// (math.MaxInt64: none), GOGC, the bytes of live and dead heap objects, all the memory the runtime has
// mapped and not returned, and where the rest of it is: the heap's goal and what was live at the last
// collection, free heap pages not returned, goroutine stacks, the runtime's own structures, the
// collections run and the goroutines alive (bench/pod_memory.py --probe samples them over a run).
var runtimeFigures = map[string]string{
	"memoryLimit":   "/gc/gomemlimit:bytes",
	"gcPercent":     "/gc/gogc:percent",
	"heapObjects":   "/memory/classes/heap/objects:bytes",
	"runtimeMemory": "/memory/classes/total:bytes",
	"released":      "/memory/classes/heap/released:bytes",
	"gomaxprocs":    "/sched/gomaxprocs:threads",
	"heapGoal":      "/gc/heap/goal:bytes",
	"heapLive":      "/gc/heap/live:bytes",
	"heapFree":      "/memory/classes/heap/free:bytes",
	"heapUnused":    "/memory/classes/heap/unused:bytes",
	"stacks":        "/memory/classes/heap/stacks:bytes",
	"osStacks":      "/memory/classes/os-stacks:bytes",
	"metadata":      "/memory/classes/metadata/other:bytes",
	"spans":         "/memory/classes/metadata/mspan/inuse:bytes",
	"other":         "/memory/classes/other:bytes",
	"collections":   "/gc/cycles/total:gc-cycles",
	"goroutines":    "/sched/goroutines:goroutines",
}

func runtimeInfo(info map[string]any) {
	samples := make([]metrics.Sample, 0, len(runtimeFigures))
	for _, name := range runtimeFigures {
		samples = append(samples, metrics.Sample{Name: name})
	}
	metrics.Read(samples)
	byName := map[string]uint64{}
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 { // a name this Go does not have is left out
			byName[s.Name] = s.Value.Uint64()
		}
	}
	for key, name := range runtimeFigures {
		if v, ok := byName[name]; ok {
			info[key] = v
		}
	}
}

var (
	mu      sync.RWMutex
	handles = map[int64]any{}
	next    int64
)

func register(v any) int64 {
	mu.Lock()
	defer mu.Unlock()
	next++
	handles[next] = v
	return next
}

func lookup(h int64) any {
	mu.RLock()
	defer mu.RUnlock()
	return handles[h]
}

func bytesOf(p *C.char, n C.int) []byte {
	if p == nil || n <= 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n))
}

func reply(out **C.char, outn *C.int, data []byte) {
	*out = (*C.char)(C.CBytes(data))
	*outn = C.int(len(data))
}

func replyJSON(out **C.char, outn *C.int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"error": "cannot encode the result: " + err.Error()})
	}
	reply(out, outn, data)
}

// guard turns a panic into an error reply: a bug must not take the Python process down.
func guard(out **C.char, outn *C.int, result *C.longlong) {
	if r := recover(); r != nil {
		replyJSON(out, outn, map[string]any{"error": fmt.Sprintf("internal error in celkeeper's native library: %v\n%s", r, debug.Stack()), "internal": true})
		if result != nil {
			*result = -1
		}
	}
}

// deadline is a context ending after timeout nanoseconds (0: never).
func deadline(timeout C.longlong) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(context.Background(), time.Duration(timeout))
	}
	return context.WithCancel(context.Background())
}

//export native_free
func native_free(p *C.char) {
	C.free(unsafe.Pointer(p))
}

//export native_release
func native_release(h C.longlong) {
	mu.Lock()
	v := handles[int64(h)]
	delete(handles, int64(h))
	mu.Unlock()
	if c, ok := v.(interface{ Close() }); ok { // what holds goroutines (an admission policy set's informers)
		c.Close()
	}
}

// native_trim collects the garbage now and returns the memory the runtime does not use to the operating
// system (a process that has compiled policies and will not evaluate much until they change).
//
//export native_trim
func native_trim() {
	debug.FreeOSMemory()
}

// native_collect runs a whole collection now and returns when it is done (runtime.GC): a caller about to
// unmap the library's pages (ffi.release_file_pages) first lets the cycle that compiling started finish, as
// its mark workers read the library's type data and function tables while they run and would map those
// pages again.
//
//export native_collect
func native_collect() {
	runtime.GC()
}

// native_set_gc_percent sets the Go collector's GOGC (debug.SetGCPercent: a negative percent turns the
// collector off) and returns the previous setting. GOGC in the environment reaches the runtime only as the
// process started with it (Go reads its environment from the process's start, not what the process has
// set since), so a process that wants another setting than gcpercent's sets it here.
//
//export native_set_gc_percent
func native_set_gc_percent(percent C.int) C.int {
	return C.int(debug.SetGCPercent(int(percent)))
}

//export native_info
func native_info(out **C.char, outn *C.int) {
	info := map[string]any{"compatibilityVersion": environment.DefaultCompatibilityVersion().String()}
	runtimeInfo(info)
	mu.RLock()
	info["handles"] = len(handles) // what is compiled or bound and not released
	mu.RUnlock()
	if bi, ok := debug.ReadBuildInfo(); ok {
		info["go"] = bi.GoVersion
		for _, dep := range bi.Deps {
			switch dep.Path {
			case "github.com/google/cel-go", "k8s.io/apiserver", "k8s.io/kubernetes", "github.com/open-policy-agent/gatekeeper/v3":
				info[dep.Path] = dep.Version
			}
		}
	}
	replyJSON(out, outn, info)
}
