package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/sources"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/tenancy"
	"github.com/posture-dev/posture/internal/termsafe"
)

// Event reasons, one per transition.
const (
	ReasonPending    = "Pending"
	ReasonProcessing = "Processing"
	ReasonRetrying   = "Retrying"
	ReasonCompleted  = "Completed"
	ReasonFailed     = "Failed"
)

// CodeWorkerFailed is the job-level error code when the executor gives up.
const CodeWorkerFailed = "worker_failed"

// FinalizerIngestion holds a deleted Ingestion until what it owns outside
// etcd is gone: its running attempt (Job or in-process worker), its uploaded
// report, its run row and its error rows. Its findings stay: they belong to
// scans, which other ingestions may have written too.
const FinalizerIngestion = "posture.dev/ingestion-cleanup"

// IngestionReconciler drives an Ingestion through pending → processing →
// completed|failed. It is the only writer of Ingestion status: the worker
// reports through the store and this reconciler mirrors it.
type IngestionReconciler struct {
	client.Client
	Store    store.Store
	Executor Executor
	Recorder events.EventRecorder
	// MaxAttempts bounds how often a lost run (manager restart, deleted Job) is
	// started again before the ingestion fails.
	MaxAttempts int
	// PollInterval is how often progress is mirrored while processing.
	PollInterval time.Duration
	// Done, when set, receives a request whenever an in-process run ends so the
	// outcome is mirrored at once instead of at the next poll.
	Done <-chan event.TypedGenericEvent[*posturev1.Ingestion]
	Now  func() time.Time
	// Billing, when set, resolves each ingestion's accounts to Providers within
	// the tenant's plan before the parse (see billing.go); nil bills nothing.
	Billing *Billing
	// ReportRetention is how long an uploaded report is kept once its
	// ingestion has ended (completed or failed); zero deletes it as soon as
	// the outcome is in the status. The findings stay either way.
	ReportRetention time.Duration
	// Sources bounds how configMapRef, secretRef and url sources are read.
	Sources sources.Options

	fetches *sources.Fetches
}

// +kubebuilder:rbac:groups=posture.dev,resources=ingestions,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=posture.dev,resources=ingestions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch;delete,namespace=posture-system
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get,namespace=posture-system
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (r *IngestionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ing posturev1.Ingestion
	if err := r.Get(ctx, req.NamespacedName, &ing); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The tenant label decides under which tenant the report, the run, the
	// error rows and the findings are stored. Anyone who may create
	// Ingestions in a namespace can write that label, so one naming another
	// tenant than the namespace's is refused before the store is touched:
	// it would write into, or delete from, that tenant's data.
	foreign, err := r.foreignTenant(ctx, &ing)
	if err != nil {
		return ctrl.Result{}, err
	}
	if foreign != "" {
		if !ing.DeletionTimestamp.IsZero() {
			_, err := setFinalizer(ctx, r.Client, &ing, FinalizerIngestion, false)
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		return r.refuseForeign(ctx, &ing, foreign)
	}
	if !ing.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, &ing)
	}
	// The finalizer goes on before any work, so that nothing is started
	// that a deletion could leave behind.
	if _, err := setFinalizer(ctx, r.Client, &ing, FinalizerIngestion, true); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	p := &ingestionPass{orig: ing.DeepCopy()}
	switch ing.Status.Phase {
	case "":
		r.initialize(p, &ing)
		// Status writes do not wake us (see SetupWithManager): go straight
		// on, and write pending and the start together.
		return r.start(ctx, p, &ing)
	case posturev1.IngestionPending:
		return r.start(ctx, p, &ing)
	case posturev1.IngestionProcessing:
		return r.track(ctx, p, &ing)
	default:
		return r.settle(ctx, p, &ing)
	}
}

// ingestionPass is one reconcile of one Ingestion: the object as read, which
// the reconcile's one status write is a patch against, and the events that
// announce what that write records. They are emitted only once it succeeded,
// so an event never reports a transition that was lost to a conflict.
type ingestionPass struct {
	orig   *posturev1.Ingestion
	events []func()
}

func (p *ingestionPass) emit(rec events.EventRecorder, ing *posturev1.Ingestion, kind, reason, action, note string, args ...any) {
	p.events = append(p.events, func() { emit(rec, ing, kind, reason, action, note, args...) })
}

// write is the reconcile's one status write; written says whether it landed
// (res then asks for a retry after a conflict).
func (r *IngestionReconciler) write(ctx context.Context, p *ingestionPass, ing *posturev1.Ingestion) (written bool, res ctrl.Result, err error) {
	written, res, err = patchStatus(ctx, r.Client, ing, p.orig)
	if written {
		for _, e := range p.events {
			e()
		}
	}
	return written, res, err
}

// writeThen writes the status and, unless it met a conflict, comes back after requeue.
func (r *IngestionReconciler) writeThen(ctx context.Context, p *ingestionPass, ing *posturev1.Ingestion, requeue time.Duration) (ctrl.Result, error) {
	_, res, err := r.write(ctx, p, ing)
	if err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func (r *IngestionReconciler) now() metav1.Time {
	if r.Now != nil {
		return metav1.NewTime(r.Now().UTC())
	}
	return metav1.NewTime(time.Now().UTC())
}

// foreignTenant says why the tenant an Ingestion would be stored under
// cannot be trusted (tenancy.ForeignClaim); a declared Ingestion not
// labelled yet is exempt: labelTenant labels it with the owner, or fails it.
func (r *IngestionReconciler) foreignTenant(ctx context.Context, ing *posturev1.Ingestion) (string, error) {
	if ing.Labels[posturev1.LabelTenant] == "" && declared(ing) {
		return "", nil
	}
	return tenancy.ForeignClaim(ctx, r.Client, ing)
}

// refuseForeign fails an Ingestion whose tenant label names another tenant,
// in its status alone: no run, error row or report is written, read or
// deleted under the tenant the label names.
func (r *IngestionReconciler) refuseForeign(ctx context.Context, ing *posturev1.Ingestion, why string) (ctrl.Result, error) {
	if ing.Status.Phase == posturev1.IngestionFailed && ing.Status.Message == why {
		return ctrl.Result{}, nil
	}
	p := &ingestionPass{orig: ing.DeepCopy()}
	done := r.now()
	if ing.Status.RequestedAt == nil {
		requested := ing.CreationTimestamp
		ing.Status.RequestedAt = &requested
	}
	if ing.Status.CompletedAt == nil {
		ing.Status.CompletedAt = &done
	}
	setIngestionPhase(ing, posturev1.IngestionFailed, ReasonFailed, why)
	p.emit(r.Recorder, ing, corev1.EventTypeWarning, ReasonFailed, "Fail", "%s", why)
	_, res, err := r.write(ctx, p, ing)
	return res, err
}

func (r *IngestionReconciler) job(ing *posturev1.Ingestion, attempt int) ingest.Job {
	j := ingest.Job{
		Tenant:      tenancy.Of(ing),
		Namespace:   ing.Namespace,
		IngestionID: ing.Name,
		Attempt:     attempt,
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

// initialize records the accepted submission: pending, total counted at upload.
func (r *IngestionReconciler) initialize(p *ingestionPass, ing *posturev1.Ingestion) {
	requested := ing.CreationTimestamp
	ing.Status.Summary = posturev1.IngestionSummary{Total: ing.Spec.RecordCount}
	ing.Status.RequestedAt = &requested
	msg := "Queued for processing"
	if declared(ing) {
		msg = "Reading the report from " + describeSource(ing)
	}
	setIngestionPhase(ing, posturev1.IngestionPending, ReasonPending, msg)
	if declared(ing) {
		p.emit(r.Recorder, ing, corev1.EventTypeNormal, ReasonPending, "Submit", "Accepted; reading the report from %s", describeSource(ing))
	} else {
		p.emit(r.Recorder, ing, corev1.EventTypeNormal, ReasonPending, "Submit", "Accepted %d records from %s", ing.Spec.RecordCount, fileName(ing))
	}
}

// start hands the first attempt to the executor.
func (r *IngestionReconciler) start(ctx context.Context, p *ingestionPass, ing *posturev1.Ingestion) (ctrl.Result, error) {
	attempt := int(ing.Status.Attempt) + 1
	if fetch, err := r.needsFetch(ctx, ing); err != nil {
		return ctrl.Result{}, err
	} else if fetch {
		if res, done, err := r.fetch(ctx, p, ing); !done {
			return res, err
		}
	}
	job := r.job(ing, attempt)
	if job.BlobID == "" {
		return r.finish(ctx, p, ing, job, store.Outcome{Status: store.RunFailed,
			Message: "spec.source names no readable report"}, ingest.CodeUnreadable)
	}
	if r.Billing != nil {
		allowed, failure, err := r.resolveProviders(ctx, ing, job)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("resolve providers: %w", err)
		}
		if failure != nil {
			return r.finish(ctx, p, ing, job, store.Outcome{Status: store.RunFailed, Message: failure.message}, failure.code)
		}
		job.AllowedAccounts = allowed
	}
	jobName, err := r.Executor.Start(ctx, ing, job)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("start %s executor: %w", r.Executor.Name(), err)
	}
	started := r.now()
	ing.Status.StartedAt = &started
	ing.Status.Attempt = int32(attempt)
	ing.Status.JobName = jobName
	setIngestionPhase(ing, posturev1.IngestionProcessing, ReasonProcessing, "Processing records")
	p.emit(r.Recorder, ing, corev1.EventTypeNormal, ReasonProcessing, "Start", "Started attempt %d with the %s executor%s", attempt, r.Executor.Name(), jobSuffix(jobName))
	return r.writeThen(ctx, p, ing, r.pollInterval())
}

// track mirrors the worker's progress and ends the ingestion when the run ends.
func (r *IngestionReconciler) track(ctx context.Context, p *ingestionPass, ing *posturev1.Ingestion) (ctrl.Result, error) {
	attempt := int(ing.Status.Attempt)
	job := r.job(ing, attempt)
	// Observe before reading the run: a worker records its outcome before its
	// executor forgets it, so "gone" followed by "no outcome" really is lost.
	obs, err := r.Executor.Observe(ctx, ing, job)
	if err != nil {
		return ctrl.Result{}, err
	}
	run, err := r.Store.GetRun(ctx, job.Tenant, job.IngestionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		run = store.Run{Attempt: attempt, Status: store.RunRunning}
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("read run: %w", err)
	}
	if run.Attempt == attempt && (run.Status == store.RunSucceeded || run.Status == store.RunFailed) {
		return r.complete(ctx, p, ing, job, run)
	}
	switch obs.State {
	case RunFailed:
		return r.finish(ctx, p, ing, job, store.Outcome{Status: store.RunFailed, Progress: run.Progress, Message: obs.Reason}, CodeWorkerFailed)
	case RunGone, RunExited:
		if attempt >= r.maxAttempts() {
			msg := fmt.Sprintf("the worker stopped without a result %d times; last: %s", attempt, obs.Reason)
			return r.finish(ctx, p, ing, job, store.Outcome{Status: store.RunFailed, Progress: run.Progress, Message: msg}, CodeWorkerFailed)
		}
		return r.retry(ctx, p, ing, attempt+1, obs.Reason)
	}
	if run.Attempt == attempt {
		ing.Status.Summary.Processed = int64(run.Processed)
		ing.Status.Summary.Invalid = int64(run.Invalid)
	}
	return r.writeThen(ctx, p, ing, r.pollInterval())
}

// retry starts a new attempt after the previous one was lost. The worker is
// idempotent, so the new attempt rewrites the same rows.
func (r *IngestionReconciler) retry(ctx context.Context, p *ingestionPass, ing *posturev1.Ingestion, attempt int, why string) (ctrl.Result, error) {
	job := r.job(ing, attempt)
	jobName, err := r.Executor.Start(ctx, ing, job)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("restart %s executor: %w", r.Executor.Name(), err)
	}
	ing.Status.Attempt = int32(attempt)
	ing.Status.JobName = jobName
	ing.Status.Summary.Processed, ing.Status.Summary.Invalid = 0, 0
	setIngestionPhase(ing, posturev1.IngestionProcessing, ReasonRetrying, fmt.Sprintf("Attempt %d: %s", attempt, why))
	p.emit(r.Recorder, ing, corev1.EventTypeWarning, ReasonRetrying, "Restart", "Started attempt %d: %s", attempt, why)
	return r.writeThen(ctx, p, ing, r.pollInterval())
}

// finish records an outcome the worker could not record itself (it is gone),
// closing the run so that a late worker cannot write after it, then completes.
func (r *IngestionReconciler) finish(ctx context.Context, p *ingestionPass, ing *posturev1.Ingestion, job ingest.Job, o store.Outcome, code string) (ctrl.Result, error) {
	// The worker may never have started (a Job whose pod never ran): open the
	// attempt's run so the error row and outcome have somewhere to go. A run the
	// worker did open is left as it is, keeping the progress it reached.
	if run, err := r.Store.GetRun(ctx, job.Tenant, job.IngestionID); errors.Is(err, store.ErrNotFound) || (err == nil && run.Attempt < job.Attempt) {
		if err := r.Store.StartRun(ctx, job.Tenant, job.IngestionID, job.Attempt, job.Total); err != nil && !errors.Is(err, store.ErrStaleAttempt) {
			return ctrl.Result{}, fmt.Errorf("open run: %w", err)
		}
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("read run: %w", err)
	}
	batch := store.Batch{Errors: []store.IngestionError{{Code: code, Detail: o.Message}}}
	if err := r.Store.WriteBatch(ctx, job.Tenant, job.IngestionID, job.Attempt, batch); err != nil && !errors.Is(err, store.ErrStaleAttempt) {
		return ctrl.Result{}, fmt.Errorf("record job-level error: %w", err)
	}
	if err := r.Store.FinishRun(ctx, job.Tenant, job.IngestionID, job.Attempt, o); err != nil && !errors.Is(err, store.ErrStaleAttempt) {
		return ctrl.Result{}, fmt.Errorf("close run: %w", err)
	}
	run, err := r.Store.GetRun(ctx, job.Tenant, job.IngestionID)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read run: %w", err)
	}
	return r.complete(ctx, p, ing, job, run)
}

// complete copies a finished run into the status: the terminal transition.
func (r *IngestionReconciler) complete(ctx context.Context, p *ingestionPass, ing *posturev1.Ingestion, job ingest.Job, run store.Run) (ctrl.Result, error) {
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
	if run.Status == store.RunSucceeded {
		msg := fmt.Sprintf("Processed %d records, %d invalid", run.Processed, run.Invalid)
		setIngestionPhase(ing, posturev1.IngestionCompleted, ReasonCompleted, msg)
		p.emit(r.Recorder, ing, corev1.EventTypeNormal, ReasonCompleted, "Complete", "%s", msg)
	} else {
		setIngestionPhase(ing, posturev1.IngestionFailed, ReasonFailed, run.Message)
		p.emit(r.Recorder, ing, corev1.EventTypeWarning, ReasonFailed, "Fail", "%s", run.Message)
	}
	// Read before the terminal write, so that a store error leaves the
	// ingestion to be completed (and counted) again rather than uncounted.
	codes, err := r.Store.IngestionErrorCodes(ctx, job.Tenant, job.IngestionID)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("count error rows for metrics: %w", err)
	}
	written, res, err := r.write(ctx, p, ing)
	if !written {
		// A conflict, or the ingestion is gone: the next reconcile, if any,
		// completes it from the newer version.
		return res, err
	}
	// Counted once: only the write that made the ingestion terminal gets here.
	observeEnded(ing, codes)
	if err := r.Executor.Release(ctx, ing, job); err != nil {
		return ctrl.Result{}, err
	}
	// Should this fail, settle retries it: the next reconcile of the now
	// terminal ingestion goes there.
	return r.releaseReport(ctx, ing)
}

// settle keeps a terminal ingestion's bookkeeping current; it never re-runs it.
func (r *IngestionReconciler) settle(ctx context.Context, p *ingestionPass, ing *posturev1.Ingestion) (ctrl.Result, error) {
	if ing.Status.Attempt > 0 {
		if err := r.Executor.Release(ctx, ing, r.job(ing, int(ing.Status.Attempt))); err != nil {
			return ctrl.Result{}, err
		}
	}
	// Restamped from the phase, so an ingestion that ended under an older
	// operator gains the conditions this one derives; usually a no-op.
	setIngestionPhase(ing, ing.Status.Phase, ingestionReason(ing.Status.Phase), ing.Status.Message)
	if _, res, err := r.write(ctx, p, ing); err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	return r.releaseReport(ctx, ing)
}

// reconcileDelete cancels a deleted Ingestion's attempt, then deletes its
// report, run row and error rows, then lets it go. Nothing is deleted from
// the store while a worker may still write for the ingestion.
func (r *IngestionReconciler) reconcileDelete(ctx context.Context, ing *posturev1.Ingestion) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(ing, FinalizerIngestion) {
		return ctrl.Result{}, nil
	}
	stopped, err := r.Executor.Cancel(ctx, ing)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("cancel the attempts of deleted ingestion %s/%s: %w", ing.Namespace, ing.Name, err)
	}
	if !stopped {
		return ctrl.Result{RequeueAfter: min(r.pollInterval(), 250*time.Millisecond)}, nil
	}
	tenant := tenancy.Of(ing)
	if r.fetches != nil {
		if t, id := r.fetches.Forget(ing.UID); id != "" {
			r.dropBlob(ctx, t, id)
		}
	}
	if id := reportBlobID(ing); id != "" {
		if err := r.Store.DeleteBlob(ctx, tenant, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			return ctrl.Result{}, fmt.Errorf("delete report %s of deleted ingestion %s/%s: %w", id, ing.Namespace, ing.Name, err)
		}
	}
	if err := r.Store.DeleteRun(ctx, tenant, ing.Name); err != nil {
		return ctrl.Result{}, fmt.Errorf("delete the run and error rows of deleted ingestion %s/%s: %w", ing.Namespace, ing.Name, err)
	}
	_, err = setFinalizer(ctx, r.Client, ing, FinalizerIngestion, false)
	return ctrl.Result{}, client.IgnoreNotFound(err)
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

func (r *IngestionReconciler) pollInterval() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return time.Second
}

func (r *IngestionReconciler) maxAttempts() int {
	if r.MaxAttempts > 0 {
		return r.MaxAttempts
	}
	return 3
}

// fileName is the report's name as events show it. Uploads refuse names
// that act on a terminal; an object stored before that rule existed still
// must not put such a character in an event, which every terminal that
// prints events would act on.
func fileName(ing *posturev1.Ingestion) string {
	if ing.Spec.Source.Upload != nil {
		return termsafe.String(ing.Spec.Source.Upload.Filename)
	}
	return describeSource(ing)
}

func jobSuffix(name string) string {
	if name == "" {
		return ""
	}
	return " (Job " + name + ")"
}

// SetupWithManager wires the reconciler: Ingestions, the worker Jobs that point
// back at them by label, and the in-process pool's completions.
func (r *IngestionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// A declared Ingestion's tenant is looked up by namespace (labelTenant).
	if err := auth.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		// Status writes (ours alone) must not wake us: progress is polled.
		// A deletion sets a timestamp, which wakes us too.
		For(&posturev1.Ingestion{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, deletionStarted))).
		Named("ingestion").
		// Starting an ingestion reads its report once for billing; several
		// workers keep one large upload from holding up the others.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4})
	if _, ok := r.Executor.(*JobExecutor); ok {
		b = b.Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(jobToIngestion),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				return o.GetLabels()[LabelComponent] == "ingestion-worker"
			})))
	}
	if r.Done != nil {
		b = b.WatchesRawSource(source.Channel(r.Done, &handler.TypedEnqueueRequestForObject[*posturev1.Ingestion]{}))
	}
	// url sources are read in the background; the end of a read wakes its
	// Ingestion.
	r.fetches = sources.NewFetches(r.Sources.URLFetchesPerTenant, func(tenant, id string) {
		r.dropBlob(context.Background(), tenant, id)
	})
	if err := mgr.Add(r.fetches); err != nil {
		return err
	}
	b = b.WatchesRawSource(source.Channel(r.fetches.Wake(), &handler.TypedEnqueueRequestForObject[*posturev1.Ingestion]{}))
	return b.Complete(quietConflicts(r))
}

// deletionStarted passes the update that marks an object deleted.
var deletionStarted = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
}}

func jobToIngestion(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[posturev1.LabelIngestion] == "" || l[LabelIngestionNamespace] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[LabelIngestionNamespace], Name: l[posturev1.LabelIngestion]}}}
}
