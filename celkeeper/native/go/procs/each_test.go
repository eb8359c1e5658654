package procs

import (
	"sync/atomic"
	"testing"
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

func TestEachRunsOnAsManyGoroutinesAsCoresAtOnce(t *testing.T) {
	if Cores() < 2 {
		t.Skip("one core")
	}
	var running, most atomic.Int32
	release := make(chan struct{})
	entered := make(chan struct{}, Cores())
	done := make(chan struct{})
	go func() {
		Each(Cores(), func(int) {
			now := running.Add(1)
			for {
				m := most.Load()
				if now <= m || most.CompareAndSwap(m, now) {
					break
				}
			}
			entered <- struct{}{}
			<-release
			running.Add(-1)
		})
		close(done)
	}()
	for range Cores() { // every call has begun before any ends: they run at once
		<-entered
	}
	close(release)
	<-done
	if got := int(most.Load()); got != Cores() {
		t.Fatalf("at most %d calls at once, want %d", got, Cores())
	}
}
