package k8scel

import (
	"context"
	"encoding/json"
	"os"
	"syscall"
	"testing"
	"time"
)

// processCPU is the process's CPU time (user and system, every thread: the GC's too).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The benchmarks collect garbage as the library does.
func init() { SetGCPercent() }

// loopCPU runs f b.N times and reports the process CPU time per call (wall time is unreliable on a
// shared machine).
func loopCPU(b *testing.B, f func()) {
	b.ReportAllocs()
	started := processCPU()
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(processCPU()-started)/float64(b.N), "cpu-ns/op")
}

// A workload dumped by bench/engine_workload.py (templates, the constraints a request selects, the
// request), replayed here so that the Go path can be profiled on real policies:
//
//	CELGO_WORKLOAD=/tmp/w.json go test -run XXX -bench Workload -cpuprofile cpu.prof ./engine/
type workload struct {
	Templates []struct {
		Name   string         `json:"name"`
		Source map[string]any `json:"source"`
	} `json:"templates"`
	Constraints []struct {
		Template int            `json:"template"`
		Object   map[string]any `json:"object"`
	} `json:"constraints"`
	Header    map[string]any `json:"header"`
	Object    any            `json:"object"`
	OldObject any            `json:"oldObject"`
	Namespace any            `json:"namespace"`
}

type loadedWorkload struct {
	templates                        []*Template
	constraints                      []*Constraint
	of                               []int
	header, object, oldObject, nsObj []byte
}

func loadWorkload(b testing.TB) *loadedWorkload {
	path := os.Getenv("CELGO_WORKLOAD")
	if path == "" {
		b.Skip("CELGO_WORKLOAD names no workload (bench/engine_workload.py writes one)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var w workload
	if err := json.Unmarshal(data, &w); err != nil {
		b.Fatal(err)
	}
	l := &loadedWorkload{}
	for _, t := range w.Templates {
		tmpl, err := CompileTemplate(t.Source)
		if err != nil {
			b.Fatalf("%s: %v", t.Name, err)
		}
		l.templates = append(l.templates, tmpl)
	}
	for _, c := range w.Constraints {
		bound, err := l.templates[c.Template].Bind(mustJSON(c.Object))
		if err != nil {
			b.Fatal(err)
		}
		l.constraints = append(l.constraints, bound)
		l.of = append(l.of, c.Template)
	}
	l.header = mustJSON(w.Header)
	if w.Object != nil {
		l.object = mustJSON(w.Object)
	}
	if w.OldObject != nil {
		l.oldObject = mustJSON(w.OldObject)
	}
	if w.Namespace != nil {
		l.nsObj = mustJSON(w.Namespace)
	}
	return l
}

func (l *loadedWorkload) decide(b testing.TB) int {
	r, err := NewRecycledRequest(l.header, l.object, l.oldObject, l.nsObj)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Done() // as the library's k8scel_validate does
	n := 0
	for i, c := range l.constraints {
		n += len(l.templates[l.of[i]].Validate(context.Background(), r, c, PerCallLimit))
	}
	return n
}

func BenchmarkWorkload(b *testing.B) {
	l := loadWorkload(b)
	loopCPU(b, func() { l.decide(b) })
}

// BenchmarkWorkloadParallel decides the workload's request on every P at once, as a worker's event
// loops do: what the threads sharing the templates (their remembered results) cost each other.
func BenchmarkWorkloadParallel(b *testing.B) {
	l := loadWorkload(b)
	b.ReportAllocs()
	started := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.decide(b)
		}
	})
	b.ReportMetric(float64(processCPU()-started)/float64(b.N), "cpu-ns/op")
}
