package admissionpolicy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"celkeeper.local/native/procs"
)

// A workload written by bench/admission_policies.py --dump DIR (its policies, Namespaces and objects, as
// `celkeeper test -f` is given them), replayed here so that the Go path can be profiled on it:
//
//	ADMISSIONPOLICY_WORKLOAD=DIR/dense go test -run XXX -bench Workload -cpuprofile cpu.prof ./admissionpolicy/

// processCPU is the process's CPU time (user and system, every thread: the GC's too).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// items is the items of a List file written by bench/admission_policies.py.
func items(b *testing.B, path string) []json.RawMessage {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		b.Fatal(err)
	}
	return list.Items
}

func raws(in []json.RawMessage) []runtime.RawExtension {
	out := make([]runtime.RawExtension, len(in))
	for i, r := range in {
		out[i] = runtime.RawExtension{Raw: r}
	}
	return out
}

func workload(b *testing.B) (Input, []json.RawMessage) {
	dir := os.Getenv("ADMISSIONPOLICY_WORKLOAD")
	if dir == "" {
		b.Skip("ADMISSIONPOLICY_WORKLOAD names no workload (bench/admission_policies.py --dump writes one)")
	}
	in := Input{
		Policies:   raws(items(b, filepath.Join(dir, "policies.json"))),
		Namespaces: raws(items(b, filepath.Join(dir, "namespaces.json"))),
	}
	return in, items(b, filepath.Join(dir, "objects.json"))
}

// BenchmarkWorkloadSet builds the workload's set; BenchmarkWorkloadReview reviews each of its objects
// once per iteration, one after the other (CPU time per object: cpu-ns/object).
func BenchmarkWorkloadSet(b *testing.B) {
	in, _ := workload(b)
	b.ReportAllocs()
	started := processCPU()
	for b.Loop() {
		set, _, err := NewSet(in)
		if err != nil {
			b.Fatal(err)
		}
		set.Close()
	}
	b.ReportMetric(float64(processCPU()-started)/float64(b.N), "cpu-ns/op")
}

// workloadSet is the workload's set (closed when the benchmark ends) and its objects.
func workloadSet(b *testing.B) (*Set, []json.RawMessage) {
	in, objects := workload(b)
	set, _, err := NewSet(in)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(set.Close)
	return set, objects
}

func BenchmarkWorkloadReview(b *testing.B) {
	set, objects := workloadSet(b)
	b.ReportAllocs()
	denied := 0
	started := processCPU()
	for b.Loop() {
		denied = 0
		for _, obj := range objects {
			resp, err := set.Review(context.Background(), Request{Operation: "CREATE", Object: obj})
			if err != nil {
				b.Fatal(err)
			}
			if !resp.Allowed {
				denied++
			}
		}
	}
	b.ReportMetric(float64(processCPU()-started)/float64(b.N*len(objects)), "cpu-ns/object")
	b.ReportMetric(float64(denied), "denied")
}

// BenchmarkWorkloadReviewConcurrent reviews each of the workload's objects once per iteration on as many
// goroutines as the process has cores, as the library's batch call does (wall per iteration: ns/op).
func BenchmarkWorkloadReviewConcurrent(b *testing.B) {
	set, objects := workloadSet(b)
	b.ReportAllocs()
	started := processCPU()
	for b.Loop() {
		procs.Each(len(objects), func(i int) {
			if _, err := set.Review(context.Background(), Request{Operation: "CREATE", Object: objects[i]}); err != nil {
				b.Error(err)
			}
		})
	}
	b.ReportMetric(float64(processCPU()-started)/float64(b.N*len(objects)), "cpu-ns/object")
}
