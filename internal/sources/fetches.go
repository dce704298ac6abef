package sources

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/store"
)

// DefaultURLFetchesPerTenant bounds the url sources of one tenant read at
// once.
const DefaultURLFetchesPerTenant = 2

// Fetches reads url sources in the background, so that a reconcile never
// waits on the network. A fetch used to run inside the reconcile, for up to
// the URL timeout: five slow URLs of one tenant held all four workers of the
// Ingestion controller, and every other tenant's upload waited behind them.
//
// A reconcile starts the fetch of an Ingestion and returns; the fetch runs
// once a slot of its tenant is free (perTenant at a time), bounded by the URL
// timeout once it runs and by the source wait while it waits for a slot, and
// its end wakes the Ingestion's next reconcile, which takes the result. It
// runs on the leader with the manager's lifetime: a manager that stops ends
// its fetches, and the next leader's reconcile starts them again.
type Fetches struct {
	perTenant int
	// wake carries the Ingestion whose fetch ended to its controller.
	wake chan event.TypedGenericEvent[*posturev1.Ingestion]
	// drop deletes a stored report that no reconcile will take (its
	// Ingestion was deleted while it was read).
	drop func(tenant, blobID string)

	mu      sync.Mutex
	ctx     context.Context // the manager's, once Start runs
	byUID   map[types.UID]*urlFetch
	tenants map[string]chan struct{}
	wg      sync.WaitGroup
}

// Result is what an ended fetch stored: the report's blob and its record
// count, or why there is none.
type Result struct {
	Blob    store.Blob
	Records int
	Err     error
}

// urlFetch is one fetch in flight, or its result until a reconcile takes it.
type urlFetch struct {
	Result
	cancel context.CancelFunc
	done   bool
	tenant string
}

// NewFetches reads at most perTenant URLs of a tenant at once; drop deletes
// a report stored for an Ingestion deleted meanwhile.
func NewFetches(perTenant int, drop func(tenant, blobID string)) *Fetches {
	if perTenant <= 0 {
		perTenant = DefaultURLFetchesPerTenant
	}
	return &Fetches{
		perTenant: perTenant,
		drop:      drop,
		wake:      make(chan event.TypedGenericEvent[*posturev1.Ingestion], 64),
		byUID:     map[types.UID]*urlFetch{},
		tenants:   map[string]chan struct{}{},
	}
}

// Start implements manager.Runnable: fetches run with its context.
func (f *Fetches) Start(ctx context.Context) error {
	f.mu.Lock()
	f.ctx = ctx
	f.mu.Unlock()
	<-ctx.Done()
	f.mu.Lock()
	for _, uf := range f.byUID {
		if uf.cancel != nil {
			uf.cancel()
		}
	}
	f.mu.Unlock()
	f.wg.Wait()
	return nil
}

// Wake carries the Ingestion whose fetch ended to its controller, which
// watches it as a source of requests.
func (f *Fetches) Wake() <-chan event.TypedGenericEvent[*posturev1.Ingestion] { return f.wake }

// NeedLeaderElection implements manager.LeaderElectionRunnable: fetches
// serve the reconciles, which run on the leader.
func (f *Fetches) NeedLeaderElection() bool { return true }

// Take returns the ended fetch of ing and forgets it, or says whether one is
// still in flight.
func (f *Fetches) Take(ing *posturev1.Ingestion) (result *Result, running bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	uf, ok := f.byUID[ing.UID]
	switch {
	case !ok:
		return nil, false
	case !uf.done:
		return nil, true
	}
	delete(f.byUID, ing.UID)
	return &uf.Result, false
}

// Begin starts the fetch of ing: read runs once a slot of tenant is free,
// unless slotBy passes first (read bounds itself once it runs: the URL
// timeout covers the request and its body). It reports false when fetches
// cannot start yet (the manager has not started them); the reconcile then
// comes back.
func (f *Fetches) Begin(ing *posturev1.Ingestion, tenant string, slotBy time.Time,
	read func(ctx context.Context) (store.Blob, int, error)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx == nil || f.ctx.Err() != nil {
		return false
	}
	if _, ok := f.byUID[ing.UID]; ok {
		return true
	}
	slot, ok := f.tenants[tenant]
	if !ok {
		slot = make(chan struct{}, f.perTenant)
		f.tenants[tenant] = slot
	}
	ctx, cancel := context.WithCancel(f.ctx)
	uf := &urlFetch{cancel: cancel, tenant: tenant}
	f.byUID[ing.UID] = uf
	// The goroutine outlives this reconcile, which goes on changing ing.
	woken, uid := ing.DeepCopy(), ing.UID
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer cancel()
		blob, records, err := f.run(ctx, slot, slotBy, read)
		f.mu.Lock()
		uf.done, uf.Result = true, Result{Blob: blob, Records: records, Err: err}
		forgotten := f.byUID[uid] != uf
		f.mu.Unlock()
		if forgotten {
			if err == nil && f.drop != nil {
				f.drop(tenant, blob.ID)
			}
			return
		}
		select {
		case f.wake <- event.TypedGenericEvent[*posturev1.Ingestion]{Object: woken}:
		case <-ctx.Done():
		}
	}()
	return true
}

func (f *Fetches) run(ctx context.Context, slot chan struct{}, slotBy time.Time,
	read func(ctx context.Context) (store.Blob, int, error)) (store.Blob, int, error) {
	wait, cancelWait := context.WithDeadline(ctx, slotBy)
	select {
	case slot <- struct{}{}:
		cancelWait()
	case <-wait.Done():
		cancelWait()
		if ctx.Err() != nil {
			return store.Blob{}, 0, ctx.Err()
		}
		return store.Blob{}, 0, transient("no turn to read it came free: a tenant's URL sources are read %d at a time, and its others are still being read", f.perTenant)
	}
	defer func() { <-slot }()
	return read(ctx)
}

// Forget cancels the fetch of a deleted Ingestion and returns the blob a
// fetch that had ended stored for it, which nothing will use now.
func (f *Fetches) Forget(uid types.UID) (tenant, blobID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	uf, ok := f.byUID[uid]
	if !ok {
		return "", ""
	}
	delete(f.byUID, uid)
	if !uf.done {
		uf.cancel()
		return "", ""
	}
	return uf.tenant, uf.Blob.ID
}
