package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/sources"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/tenancy"
)

// Event reason of a report fetched for a declared source.
const ReasonFetched = "Fetched"

// CodeReportChanged is the job-level error of a declared source whose
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

// fetch reads a declared source once and stores it as a blob through the
// same checks as an upload, then records the blob and its digest in status.
// done is false when the reconcile ends here (waiting, or failed).
//
// A digest already in status means the report was read before and its copy
// has been lost before a run: the content read now must be the same, or
// the ingestion fails rather than importing a different report under the
// same object.
func (r *IngestionReconciler) fetch(ctx context.Context, p *ingestionPass, ing *posturev1.Ingestion) (res ctrl.Result, done bool, err error) {
	// The label patch answers with the stored object, whose status lacks
	// what this reconcile has decided so far; keep that, and patch the
	// status against the version the label patch produced.
	decided := ing.Status.DeepCopy()
	err = r.labelTenant(ctx, ing)
	ing.Status = *decided
	if err == nil {
		p.orig.ResourceVersion, p.orig.Labels = ing.ResourceVersion, ing.Labels
	}
	var blob store.Blob
	var records int
	tenant := tenancy.Of(ing)
	if err == nil && ing.Spec.Source.URL != nil && r.fetches != nil {
		var again time.Duration
		blob, records, again, err = r.fetchURL(ing, tenant)
		if again > 0 {
			// The status as decided so far (pending, on a first pass)
			// is written; the fetch's end wakes the next reconcile, and
			// the requeue stands in should that wake-up be lost.
			res, err := r.writeThen(ctx, p, ing, again)
			return res, false, err
		}
	} else if err == nil {
		blob, records, err = r.sources().Read(ctx, ing, tenant)
	}
	var se *sources.Error
	if errors.As(err, &se) {
		if se.Transient {
			if deadline := ing.CreationTimestamp.Add(r.Sources.MaxWait()); r.now().Time.Before(deadline) {
				return r.waitForSource(ctx, p, ing, se.Message, deadline)
			}
			se.Message += fmt.Sprintf(" (gave up %s after the Ingestion was created)", r.Sources.MaxWait())
		}
		res, err := r.finish(ctx, p, ing, r.job(ing, int(ing.Status.Attempt)+1), store.Outcome{Status: store.RunFailed, Message: se.Message}, se.Code)
		return res, false, err
	}
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if prev := ing.Status.Report; prev != nil && prev.SHA256 != "" && prev.SHA256 != blob.SHA256 {
		r.dropBlob(ctx, tenant, blob.ID)
		msg := fmt.Sprintf("%s changed since it was first read: sha256 %s then, %s now; an Ingestion imports one report only, so it was not imported again: create an Ingestion with a new name for the new content", describeSource(ing), prev.SHA256, blob.SHA256)
		res, err := r.finish(ctx, p, ing, r.job(ing, int(ing.Status.Attempt)+1), store.Outcome{Status: store.RunFailed, Message: msg}, CodeReportChanged)
		return res, false, err
	}
	fetched := r.now()
	ing.Status.Report = &posturev1.FetchedReport{BlobID: blob.ID, Size: blob.Size, SHA256: blob.SHA256, RecordCount: int64(records), FetchedAt: &fetched}
	ing.Status.Summary.Total = int64(records)
	p.emit(r.Recorder, ing, corev1.EventTypeNormal, ReasonFetched, "Fetch", "Stored %d records (%d bytes, sha256 %s) from %s", records, blob.Size, blob.SHA256, describeSource(ing))
	// Recording the stored copy is this reconcile's status write; the run
	// starts in the next one, from a status that names its blob.
	written, res, err := r.write(ctx, p, ing)
	if err != nil || !written {
		// Not recorded, so not used: the next reconcile reads the source again.
		r.dropBlob(ctx, tenant, blob.ID)
		return res, false, err
	}
	return ctrl.Result{RequeueAfter: time.Millisecond}, false, nil
}

// labelTenant gives a declared Ingestion the tenant label an upload gets
// from the API, so that its report, run and findings are stored under the
// tenant whose users read them. The Tenant of the namespace is looked up;
// GitOps tools may create it after the Ingestion, so none is a wait. The
// label is added by a merge patch, which a GitOps tool leaves alone: it is
// not in the manifest it applies.
func (r *IngestionReconciler) labelTenant(ctx context.Context, ing *posturev1.Ingestion) error {
	if ing.Labels[posturev1.LabelTenant] != "" {
		return nil
	}
	t, err := tenancy.ForNamespace(ctx, r.Client, ing.Namespace)
	var te *tenancy.Error
	switch {
	case errors.As(err, &te):
		return &sources.Error{Code: CodeTenantNotFound, Message: te.Reason}
	case err != nil:
		return err
	case t == nil:
		return &sources.Error{Code: ingest.CodeUnreadable, Message: fmt.Sprintf("no Tenant uses namespace %s", ing.Namespace), Transient: true}
	}
	orig := ing.DeepCopy()
	if ing.Labels == nil {
		ing.Labels = map[string]string{}
	}
	ing.Labels[posturev1.LabelTenant] = t.Name
	if err := r.Patch(ctx, ing, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("label Ingestion %s/%s with its tenant %s: %w", ing.Namespace, ing.Name, t.Name, err)
	}
	return nil
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

func (r *IngestionReconciler) waitForSource(ctx context.Context, p *ingestionPass, ing *posturev1.Ingestion, why string, deadline time.Time) (ctrl.Result, bool, error) {
	msg := fmt.Sprintf("Waiting for the report: %s; retrying until %s", why, deadline.UTC().Format(time.RFC3339))
	setIngestionPhase(ing, posturev1.IngestionPending, ReasonPending, msg)
	res, err := r.writeThen(ctx, p, ing, min(5*time.Second, time.Until(deadline)+time.Second))
	return res, false, err
}

func (r *IngestionReconciler) dropBlob(ctx context.Context, tenant, id string) {
	if err := r.Store.DeleteBlob(context.WithoutCancel(ctx), tenant, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		ctrl.LoggerFrom(ctx).Error(err, "delete an unused copy of a declared report", "blob", id)
	}
}
