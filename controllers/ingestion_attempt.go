package controllers

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/tenancy"
)

// attempt is the work the executor hands a worker for one attempt of ing.
func (r *IngestionReconciler) attempt(ing *posturev1.Ingestion, n int) ingest.Attempt {
	j := ingest.Attempt{
		Tenant:      tenancy.Of(ing),
		Namespace:   ing.Namespace,
		IngestionID: ing.Name,
		Attempt:     n,
		Total:       int(ing.Spec.RecordCount),
	}
	if ing.Spec.Source.Upload != nil {
		j.BlobID = ing.Spec.Source.Upload.BlobID
		j.ReportSHA256 = ing.Spec.Source.Upload.SHA256
	} else if rep := ing.Status.Report; rep != nil {
		// A declared source reaches the worker as the blob it was stored as.
		j.BlobID = rep.BlobID
		j.ReportSHA256 = rep.SHA256
		j.Total = int(rep.RecordCount)
	}
	if r.Billing != nil {
		// Every attempt bills as the first one decided.
		j.AllowedAccounts = AllowedAccountsOf(ing)
	}
	return j
}

// runAttempt is the step that keeps an attempt running: it starts the first
// one of a pending ingestion, and for a processing one asks the executor
// how its attempt fares, starting another when it was lost without an
// outcome, or failing the ingestion when the executor gave up or too many
// were lost. What the attempt's run recorded is left to mirrorRun.
func (r *IngestionReconciler) runAttempt(ctx context.Context, ing *posturev1.Ingestion, f *ingestionFacts) (next, error) {
	switch ing.Status.Phase {
	case "", posturev1.IngestionPending:
		return r.startAttempt(ctx, ing, f, int(ing.Status.Attempt)+1, "")
	case posturev1.IngestionProcessing:
	default:
		return goOn, nil
	}
	n := int(ing.Status.Attempt)
	a := r.attempt(ing, n)
	// Observe before reading the run: a worker records its outcome before its
	// executor forgets it, so "gone" followed by "no outcome" really is lost.
	obs, err := r.Executor.Observe(ctx, ing, a)
	if err != nil {
		return goOn, err
	}
	run, err := r.Store.GetRun(ctx, a.Tenant, a.IngestionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		run = store.Run{Attempt: n, Status: store.RunRunning}
	case err != nil:
		return goOn, fmt.Errorf("read run: %w", err)
	}
	f.Run = &run
	if run.Attempt == n && (run.Status == store.RunSucceeded || run.Status == store.RunFailed) {
		f.Ended = &run
		return goOn, nil
	}
	switch obs.State {
	case AttemptFailed:
		return r.fail(ctx, ing, f, CodeWorkerFailed, obs.Reason, run.Progress)
	case AttemptGone, AttemptExited:
		if n >= r.maxAttempts() {
			return r.fail(ctx, ing, f, CodeWorkerFailed, fmt.Sprintf("the worker stopped without a result %d times; last: %s", n, obs.Reason), run.Progress)
		}
		// The worker is idempotent, so the new attempt rewrites the same rows.
		return r.startAttempt(ctx, ing, f, n+1, obs.Reason)
	}
	return goOn, nil
}

// startAttempt hands attempt n to the executor; retry says why the one
// before it was lost.
func (r *IngestionReconciler) startAttempt(ctx context.Context, ing *posturev1.Ingestion, f *ingestionFacts, n int, retry string) (next, error) {
	a := r.attempt(ing, n)
	if a.BlobID == "" {
		return r.fail(ctx, ing, f, ingest.CodeUnreadable, "spec.source names no readable report", store.Progress{})
	}
	jobName, err := r.Executor.Start(ctx, ing, a)
	if err != nil {
		return goOn, fmt.Errorf("start attempt %d with the %s executor: %w", n, r.Executor.Name(), err)
	}
	if retry == "" {
		started := r.now()
		ing.Status.StartedAt = &started
	} else {
		ing.Status.Summary.Processed, ing.Status.Summary.Invalid = 0, 0
	}
	ing.Status.Attempt = int32(n)
	ing.Status.JobName = jobName
	f.Started, f.Retry = n, retry
	return stopFor(r.pollInterval()), nil
}

// fail records an outcome the worker could not record itself (it is gone,
// or never ran), closing the run so that a late worker cannot write after
// it; the ingestion then ends with that run. progress is what the lost
// worker had reached.
func (r *IngestionReconciler) fail(ctx context.Context, ing *posturev1.Ingestion, f *ingestionFacts, code, message string, progress store.Progress) (next, error) {
	a := r.attempt(ing, int(ing.Status.Attempt))
	if ing.Status.Phase != posturev1.IngestionProcessing {
		// It failed before an attempt ran: the outcome is the next one's.
		a = r.attempt(ing, int(ing.Status.Attempt)+1)
	}
	// The worker may never have started (a Job whose pod never ran): open the
	// attempt's run so the error row and outcome have somewhere to go. A run
	// the worker did open is left as it is, keeping the progress it reached.
	if run, err := r.Store.GetRun(ctx, a.Tenant, a.IngestionID); errors.Is(err, store.ErrNotFound) || (err == nil && run.Attempt < a.Attempt) {
		if err := r.Store.StartRun(ctx, a.Tenant, a.IngestionID, a.Attempt, a.Total); err != nil && !errors.Is(err, store.ErrStaleAttempt) {
			return goOn, fmt.Errorf("open run: %w", err)
		}
	} else if err != nil {
		return goOn, fmt.Errorf("read run: %w", err)
	}
	batch := store.Batch{Errors: []store.IngestionError{{Code: code, Detail: message}}}
	if err := r.Store.WriteBatch(ctx, a.Tenant, a.IngestionID, a.Attempt, batch); err != nil && !errors.Is(err, store.ErrStaleAttempt) {
		return goOn, fmt.Errorf("record ingestion-level error: %w", err)
	}
	o := store.Outcome{Status: store.RunFailed, Progress: progress, Message: message}
	if err := r.Store.FinishRun(ctx, a.Tenant, a.IngestionID, a.Attempt, o); err != nil && !errors.Is(err, store.ErrStaleAttempt) {
		return goOn, fmt.Errorf("close run: %w", err)
	}
	run, err := r.Store.GetRun(ctx, a.Tenant, a.IngestionID)
	if err != nil {
		return goOn, fmt.Errorf("read run: %w", err)
	}
	f.Run, f.Ended = &run, &run
	return r.mirrorRun(ctx, ing, f)
}

// mirrorRun is the step that copies the attempt's run into the status: its
// progress while it runs, and its outcome once it ended. An ended run also
// has its error rows counted here, before the write that ends the
// ingestion, so that a store error leaves it to be ended (and counted)
// again rather than ended uncounted.
func (r *IngestionReconciler) mirrorRun(ctx context.Context, ing *posturev1.Ingestion, f *ingestionFacts) (next, error) {
	run := f.Ended
	if run == nil {
		if f.Run != nil && f.Run.Attempt == int(ing.Status.Attempt) {
			ing.Status.Summary.Processed = int64(f.Run.Processed)
			ing.Status.Summary.Invalid = int64(f.Run.Invalid)
		}
		if ing.Status.Phase == posturev1.IngestionProcessing {
			return stopFor(r.pollInterval()), nil
		}
		return goOn, nil
	}
	done := r.now()
	if run.FinishedAt != nil {
		done = metav1.NewTime(run.FinishedAt.UTC())
	}
	if ing.Status.StartedAt == nil {
		ing.Status.StartedAt = &done
	}
	ing.Status.CompletedAt = &done
	ing.Status.Summary.Processed = int64(run.Processed)
	ing.Status.Summary.Invalid = int64(run.Invalid)
	codes, err := r.Store.IngestionErrorCodes(ctx, tenancy.Of(ing), ing.Name)
	if err != nil {
		return goOn, fmt.Errorf("count error rows for metrics: %w", err)
	}
	f.ErrorCodes = codes
	return stopFor(0), nil
}

// reportBlobID is the stored report of an Ingestion: the upload's blob, or
// the copy a declared source was stored as; empty when there is none yet.
func reportBlobID(ing *posturev1.Ingestion) string {
	if up := ing.Spec.Source.Upload; up != nil {
		return up.BlobID
	}
	if rep := ing.Status.Report; rep != nil {
		return rep.BlobID
	}
	return ""
}

// releaseReport deletes the uploaded report of a terminal ingestion once the
// retention period has passed since it ended, or says when to come back.
// Only the controller deletes reports, and only after the outcome is in the
// status, so that whichever executor ran the attempt has finished reading.
// A report already gone counts as deleted, so repeating it is harmless.
func (r *IngestionReconciler) releaseReport(ctx context.Context, ing *posturev1.Ingestion) (ctrl.Result, error) {
	blobID := reportBlobID(ing)
	if blobID == "" {
		return ctrl.Result{}, nil
	}
	if r.ReportRetention > 0 {
		ended := ing.CreationTimestamp.Time
		if ing.Status.CompletedAt != nil {
			ended = ing.Status.CompletedAt.Time
		}
		if wait := ended.Add(r.ReportRetention).Sub(r.now().Time); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	if err := r.Store.DeleteBlob(ctx, tenancy.Of(ing), blobID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return ctrl.Result{}, fmt.Errorf("delete report %s of the ended ingestion: %w", blobID, err)
	}
	return ctrl.Result{}, nil
}
