package uploads

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	"github.com/posture-dev/posture/internal/store"
)

// Sweeper deletes, while the manager runs, the partial reports that
// uploads cut off by a killed process left in the store (an upload that
// fails in a live process cleans up after itself). It runs on the leader
// alone: the store is shared, and one sweep suffices.
type Sweeper struct {
	Store store.Janitor
	// StalledAfter is how long an upload may write nothing before it counts
	// as dead. Uploads in progress record activity every minute, so anything
	// above a few minutes never removes a live one.
	StalledAfter time.Duration
	// Interval is the time between sweeps.
	Interval time.Duration
	Log      logr.Logger
	Now      func() time.Time
}

// Start implements manager.Runnable: one sweep at once, then one per Interval.
func (s *Sweeper) Start(ctx context.Context) error {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		s.sweep(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (s *Sweeper) sweep(ctx context.Context) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	n, err := s.Store.SweepIncompleteBlobs(ctx, now().Add(-s.StalledAfter))
	switch {
	case err != nil && ctx.Err() == nil:
		// The next tick tries again; nothing depends on this one.
		s.Log.Error(err, "sweep stalled uploads")
	case n > 0:
		s.Log.Info("deleted stalled uploads", "count", n, "idleFor", s.StalledAfter.String())
	}
}
