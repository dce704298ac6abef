package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDiscards: Add returns at once; removals run one at a time, a failed
// one is tried again, Wait returns once none is pending, and Close stops
// what is still retrying.
func TestDiscards(t *testing.T) {
	ctx := context.Background()
	var running, peak atomic.Int32
	var mu sync.Mutex
	removed := map[string]int{}
	gate := make(chan struct{})
	d := NewDiscards(func(ctx context.Context, id string) error {
		n := running.Add(1)
		defer running.Add(-1)
		if p := peak.Load(); n > p {
			peak.Store(n)
		}
		<-gate
		mu.Lock()
		defer mu.Unlock()
		removed[id]++
		if id == "flaky" && removed[id] < 3 {
			return errors.New("database is locked")
		}
		if id == "stuck" {
			return errors.New("never")
		}
		return nil
	})
	start := time.Now()
	for _, id := range []string{"a", "b", "flaky"} {
		d.Add(id)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("Add took %v; it must not wait for the removal", took)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if err := d.Wait(short); err == nil {
		t.Error("Wait returned while removals were held back")
	}
	cancel()
	close(gate)
	if err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if removed["a"] != 1 || removed["b"] != 1 || removed["flaky"] != 3 {
		t.Errorf("removals %v, want a and b once, flaky three times", removed)
	}
	mu.Unlock()
	if peak.Load() != 1 {
		t.Errorf("%d removals ran at once, want one at a time", peak.Load())
	}
	d.Add("stuck")
	done := make(chan struct{})
	go func() { d.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not stop a removal that keeps failing")
	}
	d.Add("after-close")
	if err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}
