package engine

import (
	"context"
	"sync"
	"time"
)

// DiscardBatch is how many chunks one statement of a discard deletes: a few
// MiB, so no single write holds SQLite's one write lock (or a PostgreSQL
// connection) for longer than a small upload's chunk does.
const DiscardBatch = 4

// Discards removes the stored part of uploads that failed, in the background.
// An upload cut at its size limit has written up to the limit (1 GiB by
// default); deleting that and handing its pages back took minutes, and the
// refused client waited all that time for its 413, while every other
// tenant's writes queued behind the deletion. The uploader's answer must not
// wait for its clean-up, so the engine hands the blob here and returns.
//
// One blob is removed at a time, by the engine's remove, which deletes in
// batches of DiscardBatch chunks. A failed removal is tried again with a
// growing pause until it succeeds or the store closes; a blob left behind
// then is incomplete and stale, which the upload sweeper and the next Open
// delete.
type Discards struct {
	remove func(ctx context.Context, id string) error

	ctx    context.Context
	cancel context.CancelFunc
	// turn lets one removal run at a time.
	turn chan struct{}

	mu      sync.Mutex
	pending int
	idle    chan struct{} // closed while pending == 0
	done    sync.WaitGroup
}

// NewDiscards starts a discarder whose removals run with remove.
func NewDiscards(remove func(ctx context.Context, id string) error) *Discards {
	ctx, cancel := context.WithCancel(context.Background())
	idle := make(chan struct{})
	close(idle)
	return &Discards{remove: remove, ctx: ctx, cancel: cancel, turn: make(chan struct{}, 1), idle: idle}
}

// Add schedules the removal of blob id and returns at once.
func (d *Discards) Add(id string) {
	d.mu.Lock()
	if d.ctx.Err() != nil {
		d.mu.Unlock()
		return
	}
	if d.pending == 0 {
		d.idle = make(chan struct{})
	}
	d.pending++
	d.done.Add(1)
	d.mu.Unlock()
	go d.run(id)
}

func (d *Discards) run(id string) {
	defer d.finish()
	pause := 100 * time.Millisecond
	for {
		select {
		case d.turn <- struct{}{}:
		case <-d.ctx.Done():
			return
		}
		err := d.remove(d.ctx, id)
		<-d.turn
		if err == nil || d.ctx.Err() != nil {
			return
		}
		select {
		case <-time.After(pause):
		case <-d.ctx.Done():
			return
		}
		pause = min(2*pause, 30*time.Second)
	}
}

func (d *Discards) finish() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.done.Done()
	if d.pending--; d.pending == 0 {
		close(d.idle)
	}
}

// Wait returns once no removal is pending, or when ctx ends.
func (d *Discards) Wait(ctx context.Context) error {
	d.mu.Lock()
	idle := d.idle
	d.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the removals in progress and waits for them to return; what
// they leave is the sweeper's.
func (d *Discards) Close() {
	d.mu.Lock()
	d.cancel()
	d.mu.Unlock()
	d.done.Wait()
}
