package procs

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestEachCallsEveryIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, Cores(), 1000} {
		calls := make([]atomic.Int32, n)
		Each(n, func(i int) { calls[i].Add(1) })
		for i := range calls {
			if got := calls[i].Load(); got != 1 {
				t.Fatalf("n=%d: index %d called %d times", n, i, got)
			}
		}
	}
}

// Each's Cores() calls all begin before any of them ends: they run on as many goroutines at once.
func TestEachRunsOnAsManyGoroutinesAsCoresAtOnce(t *testing.T) {
	if Cores() < 2 {
		t.Skip("one core")
	}
	release := make(chan struct{})
	entered := make(chan struct{}, Cores())
	done := make(chan struct{})
	go func() {
		Each(Cores(), func(int) {
			entered <- struct{}{}
			<-release
		})
		close(done)
	}()
	defer func() { close(release); <-done }()
	for i := range Cores() {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d calls began while the first ones were still running", i, Cores())
		}
	}
}
