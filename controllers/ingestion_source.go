package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/sources"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/tenancy"
)

// Event reason of a report fetched for a declared source.
const ReasonFetched = "Fetched"

// CodeReportChanged is the ingestion-level error of a declared source whose
// content differs from the digest recorded at its first fetch.
const CodeReportChanged = "report_changed"

// declared reports whether the Ingestion's report comes from a source the
// manager reads itself, rather than an upload.
func declared(ing *posturev1.Ingestion) bool { return sources.Declared(ing) }

// describeSource names the source for messages and events.
func describeSource(ing *posturev1.Ingestion) string { return sources.Describe(ing) }

// sources reads declared reports through the manager's client.
func (r *IngestionReconciler) sources() *sources.Reader {
	return &sources.Reader{Client: r.Client, Store: r.Store, Options: r.Sources, AccessBinding: TenantAccessBindingName}
}

// needsFetch is whether the declared report must be read (again) before a
// run: never read, or its stored copy is gone before any run used it.
func (r *IngestionReconciler) needsFetch(ctx context.Context, ing *posturev1.Ingestion) (bool, error) {
	if !declared(ing) {
		return false, nil
	}
	rep := ing.Status.Report
	if rep == nil || rep.BlobID == "" {
		return true, nil
	}
	// A look at the blob's row, not its content: the worker is the only
	// reader of a stored report.
	_, _, err := r.Store.BlobAccounts(ctx, tenancy.Of(ing), rep.BlobID)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up the stored report %s: %w", rep.BlobID, err)
	}
	return false, nil
}

// readSource is the step that reads a declared source once and stores it as
// a blob through the same checks as an upload, then records the blob and
// its digest in status. Recording the stored copy ends the reconcile: the
// attempt starts in the next one, from a status that names its blob, so
// that a copy whose record was lost is never the one a worker reads.
//
// A digest already in status means the report was read before and its copy
// has been lost before a run: the content read now must be the same, or
// the ingestion fails rather than importing a different report under the
// same object.
func (r *IngestionReconciler) readSource(ctx context.Context, ing *posturev1.Ingestion, f *ingestionFacts) (next, error) {
	if ing.Status.Phase.Terminal() || ing.Status.Phase == posturev1.IngestionProcessing {
		return goOn, nil
	}
	if fetch, err := r.needsFetch(ctx, ing); err != nil || !fetch {
		return goOn, err
	}
	var blob store.Blob
	var records int
	var err error
	tenant := tenancy.Of(ing)
	if ing.Spec.Source.URL != nil && r.fetches != nil {
		var again time.Duration
		blob, records, again, err = r.fetchURL(ing, tenant)
		if again > 0 {
			// The status as decided so far (pending, on a first pass) is
			// written; the fetch's end wakes the next reconcile, and the
			// requeue stands in should that wake-up be lost.
			return stopFor(again), nil
		}
	} else {
		blob, records, err = r.sources().Read(ctx, ing, tenant)
	}
	if err != nil {
		return r.sourceFailed(ctx, ing, f, err)
	}
	if prev := ing.Status.Report; prev != nil && prev.SHA256 != "" && prev.SHA256 != blob.SHA256 {
		r.dropBlob(ctx, tenant, blob.ID)
		msg := fmt.Sprintf("%s changed since it was first read: sha256 %s then, %s now; an Ingestion imports one report only, so it was not imported again: create an Ingestion with a new name for the new content", describeSource(ing), prev.SHA256, blob.SHA256)
		return r.fail(ctx, ing, f, CodeReportChanged, msg, store.Progress{})
	}
	fetched := r.now()
	ing.Status.Report = &posturev1.FetchedReport{BlobID: blob.ID, Size: blob.Size, SHA256: blob.SHA256, RecordCount: int64(records), FetchedAt: &fetched}
	ing.Status.Summary.Total = int64(records)
	f.Fetched = true
	return stopFor(time.Millisecond), nil
}

// dropFetched deletes the copy of a declared report this reconcile stored,
// when its record in status did not land: not recorded, so never used, and
// the next reconcile reads the source again.
func (r *IngestionReconciler) dropFetched(ctx context.Context, ing *posturev1.Ingestion, f *ingestionFacts) {
	if f.Fetched && ing.Status.Report != nil {
		r.dropBlob(ctx, tenancy.Of(ing), ing.Status.Report.BlobID)
	}
}

// sourceFailed turns a declared source that could not be read into what it
// means for the Ingestion: a wait while the problem may pass and the wait
// allows, else the ingestion fails with the problem's code.
func (r *IngestionReconciler) sourceFailed(ctx context.Context, ing *posturev1.Ingestion, f *ingestionFacts, err error) (next, error) {
	var se *sources.Error
	if !errors.As(err, &se) {
		return goOn, err
	}
	msg := se.Message
	if se.Transient {
		deadline := ing.CreationTimestamp.Add(r.Sources.MaxWait())
		if r.now().Time.Before(deadline) {
			f.Waiting, f.WaitUntil = msg, deadline
			return stopFor(min(5*time.Second, time.Until(deadline)+time.Second)), nil
		}
		msg += fmt.Sprintf(" (gave up %s after the Ingestion was created)", r.Sources.MaxWait())
	}
	return r.fail(ctx, ing, f, se.Code, msg, store.Progress{})
}

// fetchURL takes the result of the background read of ing's url source, or
// starts that read; while it goes on, again is when to look again.
func (r *IngestionReconciler) fetchURL(ing *posturev1.Ingestion, tenant string) (blob store.Blob, records int, again time.Duration, err error) {
	running := r.Sources.MaxWait() + r.Sources.Timeout()
	if res, busy := r.fetches.Take(ing); busy {
		return store.Blob{}, 0, running, nil
	} else if res != nil {
		return res.Blob, res.Records, 0, res.Err
	}
	slotBy := ing.CreationTimestamp.Add(r.Sources.MaxWait())
	if now := r.now().Time; slotBy.Before(now) {
		// A read started again once the wait is over (a stored copy lost
		// before a run) still gets its turn.
		slotBy = now.Add(r.Sources.Timeout())
	}
	// The read outlives this reconcile, which goes on changing ing (a status
	// patch rewrites the whole object): it reads a copy.
	snapshot := ing.DeepCopy()
	read := func(ctx context.Context) (store.Blob, int, error) { return r.sources().Read(ctx, snapshot, tenant) }
	if !r.fetches.Begin(ing, tenant, slotBy, read) {
		// Fetches start with the manager; this reconcile came first.
		return store.Blob{}, 0, 200 * time.Millisecond, nil
	}
	return store.Blob{}, 0, running, nil
}

func (r *IngestionReconciler) dropBlob(ctx context.Context, tenant, id string) {
	if err := r.Store.DeleteBlob(context.WithoutCancel(ctx), tenant, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		ctrl.LoggerFrom(ctx).Error(err, "delete an unused copy of a declared report", "blob", id)
	}
}
