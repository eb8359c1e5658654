package mutation

import (
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Gatekeeper's System tells which mutators applied in which iteration only in its log (--log-mutations:
// pkg/mutation/logging.go logAppliedMutations, one line per mutation keyed by its "Mutation Id"). An
// explained Mutate reads that line: controller-runtime's logger (which Gatekeeper's packages log to) is
// this sink, which keeps the lines of the mutations being explained and drops everything else (nothing
// of the library may write to the Python process's streams).

func init() {
	logf.SetLogger(logr.New(captureSink{}))
}

type capture struct {
	iterations []Iteration
}

type captureRegistry struct {
	mu   sync.Mutex
	byID map[uuid.UUID]*capture
}

var captures = &captureRegistry{byID: map[uuid.UUID]*capture{}}

func (r *captureRegistry) start(id uuid.UUID) *capture {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &capture{}
	r.byID[id] = c
	return c
}

func (r *captureRegistry) stop(id uuid.UUID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byID, id)
}

func (r *captureRegistry) get(id uuid.UUID) *capture {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

type captureSink struct{}

func (captureSink) Init(logr.RuntimeInfo)            {}
func (captureSink) Enabled(int) bool                 { return true }
func (captureSink) Error(error, string, ...any)      {}
func (s captureSink) WithValues(...any) logr.LogSink { return s }
func (s captureSink) WithName(string) logr.LogSink   { return s }

func (captureSink) Info(_ int, msg string, kv ...any) {
	if msg != "Mutation applied" && msg != "Mutation not converging" {
		return
	}
	var c *capture
	for i := 0; i+1 < len(kv); i += 2 {
		if key, ok := kv[i].(string); ok && key == "Mutation Id" {
			if id, ok := kv[i+1].(uuid.UUID); ok {
				c = captures.get(id)
			}
		}
	}
	if c == nil {
		return
	}
	for i := 0; i+1 < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok || !strings.HasPrefix(key, "iteration_") {
			continue
		}
		text, _ := kv[i+1].(string)
		c.iterations = append(c.iterations, Iteration{Iteration: key, Mutators: strings.Split(text, ", ")})
	}
}
