package ingest

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
)

// Pool runs jobs in-process with bounded concurrency. It is the in-process
// executor's engine: local dev and single-replica installs, where Jobs would be
// overhead. It implements manager.Runnable so it lives and dies with the
// leader-elected controllers that feed it.
type Pool struct {
	Worker *Worker
	Size   int
	// OnDone is called after an attempt returns, so its controller can read
	// the outcome at once. It must not block.
	OnDone func(Attempt)

	mu      sync.Mutex
	ctx     context.Context
	active  map[string]activeAttempt // queued or running attempts by key
	sem     chan struct{}
	wg      sync.WaitGroup
	started chan struct{}
	once    sync.Once
}

// NewPool returns a pool of size workers (at least 1).
func NewPool(w *Worker, size int) *Pool {
	if size < 1 {
		size = 1
	}
	return &Pool{Worker: w, Size: size, active: map[string]activeAttempt{}, sem: make(chan struct{}, size), started: make(chan struct{})}
}

// ErrPoolStopped is returned by Submit when the pool is not running.
var ErrPoolStopped = errors.New("in-process executor is not running")

// Start runs until ctx ends, then cancels running jobs and waits for them.
func (p *Pool) Start(ctx context.Context) error {
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
	p.once.Do(func() { close(p.started) })
	<-ctx.Done()
	p.wg.Wait()
	return nil
}

// Submit queues attempt unless it is already queued or running.
func (p *Pool) Submit(attempt Attempt) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil || p.ctx.Err() != nil {
		return ErrPoolStopped
	}
	key := attempt.Key()
	if _, ok := p.active[key]; ok {
		return nil
	}
	ctx, cancel := context.WithCancel(p.ctx)
	p.active[key] = activeAttempt{attempt: attempt, cancel: cancel}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer cancel()
		defer func() {
			p.done(key)
			if p.OnDone != nil {
				p.OnDone(attempt)
			}
		}()
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-p.sem }()
		// The worker fails its own ingestion on a fault of its parse or
		// writes; what is left (the store failing as the run starts or
		// ends) leaves the run open for the controller's next attempt,
		// not the manager down.
		defer func() {
			if v := recover(); v != nil {
				p.Worker.Log.Error(fmt.Errorf("panic: %v", v), "ingestion run stopped on an internal error", "attempt", key, "stack", string(debug.Stack()))
			}
		}()
		if err := p.Worker.Run(ctx, attempt); err != nil && !errors.Is(err, context.Canceled) {
			p.Worker.Log.Info("ingestion run ended with an error", "attempt", key, "error", err.Error())
		}
	}()
	return nil
}

// activeAttempt is an attempt the pool holds and how to stop it.
type activeAttempt struct {
	attempt Attempt
	cancel  context.CancelFunc
}

// Cancel stops every attempt of the ingestion (tenant, ingestionID) the pool
// holds, and reports whether none is left: a cancelled attempt leaves the
// pool once its worker has returned, so the caller asks again until true.
func (p *Pool) Cancel(tenant, ingestionID string) (stopped bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	stopped = true
	for _, a := range p.active {
		if a.attempt.Tenant == tenant && a.attempt.IngestionID == ingestionID {
			a.cancel()
			stopped = false
		}
	}
	return stopped
}

// Active reports whether the attempt is queued or running in this process.
func (p *Pool) Active(attempt Attempt) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.active[attempt.Key()]
	return ok
}

func (p *Pool) done(key string) {
	p.mu.Lock()
	delete(p.active, key)
	p.mu.Unlock()
}

// Running reports whether Start has been called, for readiness checks.
func (p *Pool) Running() bool {
	select {
	case <-p.started:
		return true
	default:
		return false
	}
}
