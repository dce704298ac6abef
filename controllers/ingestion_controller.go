package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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

// CodeWorkerFailed is the ingestion-level error code when the executor gives up.
const CodeWorkerFailed = ingest.CodeWorkerFailed

// FinalizerIngestion holds a deleted Ingestion until what it owns outside
// etcd is gone: its running attempt (Job or in-process worker), its uploaded
// report, its run row and its error rows. Its findings stay: they belong to
// scans, which other ingestions may have written too.
const FinalizerIngestion = "posture.dev/ingestion-cleanup"

// IngestionReconciler drives an Ingestion through pending → processing →
// completed|failed. It is the only writer of Ingestion status: the worker
// reports through the store and this reconciler mirrors it.
//
// A reconcile is an ordered list of steps (resolve the tenant, read the
// source, admit providers, run the attempt, mirror the run). Each changes
// the Ingestion in memory and records what it found in the reconcile's
// facts; deriveIngestionStatus turns those into phase, message and
// conditions, and one deferred patch writes the status. The events that
// announce a transition are emitted only once that write has landed.
type IngestionReconciler struct {
	client.Client
	// Store holds the reports the ingestions read, their runs, which the
	// reconciler opens, fails and deletes, and their error rows, which it
	// counts for the metrics.
	Store interface {
		store.Blobs
		store.Runs
		store.IngestionErrors
	}
	Executor Executor
	Recorder events.EventRecorder
	// MaxAttempts bounds how often a lost attempt (manager restart, deleted
	// Job) is started again before the ingestion fails.
	MaxAttempts int
	// PollInterval is how often progress is mirrored while processing.
	PollInterval time.Duration
	// Done, when set, receives a request whenever an in-process attempt ends
	// so the outcome is mirrored at once instead of at the next poll.
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
	if !ing.DeletionTimestamp.IsZero() {
		// What a foreign claim names in the store is another tenant's:
		// a deleted Ingestion of that kind owns nothing to delete.
		foreign, err := r.foreignTenant(ctx, &ing)
		if err != nil {
			return ctrl.Result{}, err
		}
		if foreign != "" {
			_, err := setFinalizer(ctx, r.Client, &ing, FinalizerIngestion, false)
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		return r.reconcileDelete(ctx, &ing)
	}
	// The finalizer goes on before any work, so that nothing is started
	// that a deletion could leave behind.
	if _, err := setFinalizer(ctx, r.Client, &ing, FinalizerIngestion, true); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return r.reconcile(ctx, &ing)
}

// next is what a step asks of the reconcile: go on to the next step, or
// stop after this one and come back after requeue (0: when something
// changes).
type next struct {
	stop    bool
	requeue time.Duration
}

var goOn = next{}

func stopFor(requeue time.Duration) next { return next{stop: true, requeue: requeue} }

// ingestionStep does one part of a reconcile on ing in memory and records
// what it found in f.
type ingestionStep func(ctx context.Context, ing *posturev1.Ingestion, f *ingestionFacts) (next, error)

// reconcile runs the steps in order until one stops, then writes the status
// they decided once. A step's error ends the reconcile with nothing written:
// the next one redoes the work from the stored object.
func (r *IngestionReconciler) reconcile(ctx context.Context, ing *posturev1.Ingestion) (ctrl.Result, error) {
	orig := ing.DeepCopy()
	f := &ingestionFacts{Executor: r.Executor.Name()}
	var res ctrl.Result
	for _, step := range []ingestionStep{r.resolveTenant, r.readSource, r.admitProviders, r.runAttempt, r.mirrorRun} {
		n, err := step(ctx, ing, f)
		if ing.ResourceVersion != orig.ResourceVersion {
			// A step patched the metadata (the tenant label): the status
			// patch goes against the version that patch produced.
			orig.ResourceVersion, orig.Labels = ing.ResourceVersion, ing.Labels
		}
		if err != nil {
			r.dropFetched(ctx, ing, f)
			return ctrl.Result{}, err
		}
		if n.stop {
			res.RequeueAfter = n.requeue
			break
		}
	}
	return r.write(ctx, orig, ing, f, res)
}

// write is the reconcile's one status write. Once it has landed, the events
// announce what it recorded, an ingestion that it ended is counted, and an
// ended ingestion lets go of its attempt and, past its retention, its
// report: whichever executor ran the attempt has finished reading it.
func (r *IngestionReconciler) write(ctx context.Context, orig, ing *posturev1.Ingestion, f *ingestionFacts, res ctrl.Result) (ctrl.Result, error) {
	deriveIngestionStatus(ing, *f)
	written, wres, err := patchStatus(ctx, r.Client, ing, orig)
	if err != nil || wres.RequeueAfter > 0 {
		// Not recorded, so not used: the next reconcile decides again from
		// the newer version (a conflict), or the stored one.
		r.dropFetched(ctx, ing, f)
		return wres, err
	}
	if written {
		for _, e := range ingestionEvents(orig, ing, *f) {
			emit(r.Recorder, ing, e.kind, e.reason, e.action, "%s", e.note)
		}
		if f.Ended != nil && !orig.Status.Phase.Terminal() && ing.Status.Phase.Terminal() {
			// Counted once: only the write that ended the ingestion gets here.
			observeEnded(ing, f.ErrorCodes)
		}
	}
	if !ing.Status.Phase.Terminal() || f.Refused != "" || (!written && !orig.Status.Phase.Terminal()) {
		// A refused claim names another tenant's data: nothing of it is
		// released under that name.
		return res, nil
	}
	if ing.Status.Attempt > 0 {
		if err := r.Executor.Release(ctx, ing, r.attempt(ing, int(ing.Status.Attempt))); err != nil {
			return ctrl.Result{}, err
		}
	}
	// Should this fail, the next reconcile of the ended ingestion retries it.
	return r.releaseReport(ctx, ing)
}

// ingestionEvent is one event about an Ingestion.
type ingestionEvent struct {
	kind, reason, action, note string
}

// ingestionEvents are the events announcing what a status write recorded:
// derived from the change and the facts, so that a write lost to a conflict
// announces nothing.
func ingestionEvents(orig, ing *posturev1.Ingestion, f ingestionFacts) []ingestionEvent {
	var out []ingestionEvent
	add := func(kind, reason, action, note string) {
		out = append(out, ingestionEvent{kind, reason, action, note})
	}
	if f.Accepted {
		if sources.Declared(ing) {
			add(corev1.EventTypeNormal, ReasonPending, "Submit", "Accepted; reading the report from "+sources.Describe(ing))
		} else {
			add(corev1.EventTypeNormal, ReasonPending, "Submit", fmt.Sprintf("Accepted %d records from %s", ing.Spec.RecordCount, fileName(ing)))
		}
	}
	if rep := ing.Status.Report; f.Fetched && rep != nil {
		add(corev1.EventTypeNormal, ReasonFetched, "Fetch", fmt.Sprintf("Stored %d records (%d bytes, sha256 %s) from %s",
			rep.RecordCount, rep.Size, rep.SHA256, sources.Describe(ing)))
	}
	if was, now := meta.FindStatusCondition(orig.Status.Conditions, ConditionProvidersResolved), meta.FindStatusCondition(ing.Status.Conditions, ConditionProvidersResolved); f.Billing != nil && now != nil &&
		(was == nil || was.Status != now.Status || was.Message != now.Message) {
		if now.Status == metav1.ConditionTrue {
			add(corev1.EventTypeNormal, ReasonProvidersResolved, "Bill", now.Message)
		} else {
			add(corev1.EventTypeWarning, ReasonProviderLimit, "Bill", now.Message)
		}
	}
	if f.Started > 0 {
		if f.Retry != "" {
			add(corev1.EventTypeWarning, ReasonRetrying, "Restart", fmt.Sprintf("Started attempt %d: %s", f.Started, f.Retry))
		} else {
			add(corev1.EventTypeNormal, ReasonProcessing, "Start", fmt.Sprintf("Started attempt %d with the %s executor%s", f.Started, f.Executor, jobSuffix(ing.Status.JobName)))
		}
	}
	if !orig.Status.Phase.Terminal() || orig.Status.Message != ing.Status.Message {
		switch ing.Status.Phase {
		case posturev1.IngestionCompleted:
			add(corev1.EventTypeNormal, ReasonCompleted, "Complete", ing.Status.Message)
		case posturev1.IngestionFailed:
			add(corev1.EventTypeWarning, ReasonFailed, "Fail", ing.Status.Message)
		}
	}
	return out
}

func (r *IngestionReconciler) now() metav1.Time {
	if r.Now != nil {
		return metav1.NewTime(r.Now().UTC())
	}
	return metav1.NewTime(time.Now().UTC())
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
	return sources.Describe(ing)
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
		// Starting an ingestion reads its report's accounts for billing;
		// several workers keep one tenant's admissions from holding up
		// the others.
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
