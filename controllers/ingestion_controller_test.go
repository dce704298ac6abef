package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
)

// runInProcess starts a manager whose ingestion controller uses the in-process executor.
func runInProcess(t *testing.T, st store.Store) (stop func()) {
	t.Helper()
	return runInProcessWith(t, st, nil)
}

// runInProcessWith is runInProcess with the reconciler adjusted by tune and
// the manager's options by opts.
func runInProcessWith(t *testing.T, st store.Store, tune func(*controllers.IngestionReconciler), opts ...func(*ctrl.Options)) (stop func()) {
	t.Helper()
	return startManager(t, "default", func(mgr ctrl.Manager) error {
		worker := &ingest.Worker{Store: st, Log: ctrl.Log.WithName("worker"), ProgressInterval: 10 * time.Millisecond}
		exec, done, err := controllers.NewInProcessExecutor(mgr, worker, 2)
		if err != nil {
			return err
		}
		r := &controllers.IngestionReconciler{
			Client: mgr.GetClient(), Store: st, Executor: exec, Done: done,
			Recorder: mgr.GetEventRecorder("posture-ingestion"), PollInterval: 100 * time.Millisecond,
		}
		if tune != nil {
			tune(r)
		}
		return r.SetupWithManager(mgr)
	}, opts...)
}

func TestInProcessCompletes(t *testing.T) {
	st := newStore(t)
	ns := newNamespace(t, "tenant-a")
	runInProcess(t, st)

	ing := upload(t, st, "a", ns, testenv.Fixture("aws_1500_records.ocsf.json"))
	got := waitPhase(t, ing, posturev1.IngestionCompleted)

	if got.Status.Summary != (posturev1.IngestionSummary{Total: 1500, Processed: 1500, Invalid: 0}) {
		t.Errorf("summary = %+v, want 1500/1500/0", got.Status.Summary)
	}
	if got.Status.RequestedAt == nil || got.Status.StartedAt == nil || got.Status.CompletedAt == nil {
		t.Errorf("timestamps must all be set on a completed job: %+v", got.Status)
	}
	if got.Status.CompletedAt.Before(got.Status.StartedAt) {
		t.Errorf("completedAt %v before startedAt %v", got.Status.CompletedAt, got.Status.StartedAt)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != got.Generation {
		t.Errorf("Ready condition = %+v, want True at generation %d", ready, got.Generation)
	}
	if got.Status.ObservedGeneration != got.Generation {
		t.Errorf("observedGeneration = %d, want %d", got.Status.ObservedGeneration, got.Generation)
	}
	if reasons := eventReasons(t, ing, 3); strings.Join(reasons, ",") != "Pending,Processing,Completed" {
		t.Errorf("events = %v, want Pending, Processing, Completed", reasons)
	}
	findings, total, err := st.ListFindings(context.Background(), "a", store.FindingQuery{Page: store.Page{Number: 1, Size: 1}})
	if err != nil || total != 1500 || len(findings) != 1 {
		t.Errorf("findings stored = %d (err %v), want 1500", total, err)
	}
}

func TestInProcessFailsWithoutRecords(t *testing.T) {
	st := newStore(t)
	ns := newNamespace(t, "tenant-b")
	runInProcess(t, st)

	ing := upload(t, st, "b", ns, writeTemp(t, "empty.ocsf.json", "[]"))
	got := waitPhase(t, ing, posturev1.IngestionFailed)

	if got.Status.Summary != (posturev1.IngestionSummary{}) {
		t.Errorf("summary = %+v, want zeros", got.Status.Summary)
	}
	if got.Status.StartedAt == nil || got.Status.CompletedAt == nil {
		t.Errorf("a failed job has both timestamps: %+v", got.Status)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != controllers.ReasonFailed {
		t.Errorf("Ready condition = %+v, want False/Failed", ready)
	}
	errs, n, err := st.ListIngestionErrors(context.Background(), "b", ing.Name, store.Page{Number: 1, Size: 10})
	if err != nil || n != 1 || errs[0].RecordIndex != nil || errs[0].Code != ingest.CodeNoRecords {
		t.Errorf("errors = %+v (n %d, err %v), want one ingestion-level %s", errs, n, err, ingest.CodeNoRecords)
	}
	if reasons := eventReasons(t, ing, 3); strings.Join(reasons, ",") != "Pending,Processing,Failed" {
		t.Errorf("events = %v, want Pending, Processing, Failed", reasons)
	}
}

func TestInProcessOtherClassesFail(t *testing.T) {
	st := newStore(t)
	ns := newNamespace(t, "tenant-c")
	runInProcess(t, st)

	report := `[{"class_uid":3002,"class_name":"Authentication"},{"class_uid":3002,"class_name":"Authentication"}]`
	ing := upload(t, st, "c", ns, writeTemp(t, "auth.ocsf.json", report))
	got := waitPhase(t, ing, posturev1.IngestionFailed)
	if got.Status.Summary != (posturev1.IngestionSummary{Total: 2, Processed: 2, Invalid: 2}) {
		t.Errorf("summary = %+v, want 2/2/2", got.Status.Summary)
	}
	errs, _, err := st.ListIngestionErrors(context.Background(), "c", ing.Name, store.Page{Number: 1, Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	perRecord := map[int]bool{}
	for _, e := range errs {
		if e.RecordIndex != nil && e.Code == "unsupported_class" {
			perRecord[*e.RecordIndex] = true
		}
	}
	if !perRecord[0] || !perRecord[1] {
		t.Errorf("want an unsupported_class error for records 0 and 1, got %+v", errs)
	}
}

// blockingStore holds every batch write until released, so a test can stop
// the manager while a run is provably in the middle of its work.
type blockingStore struct {
	store.Store
	release chan struct{}
	entered sync.Once
	inBatch chan struct{}
}

func (b *blockingStore) WriteBatch(ctx context.Context, tenant, id string, attempt int, batch store.Batch) error {
	b.entered.Do(func() { close(b.inBatch) })
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.Store.WriteBatch(ctx, tenant, id, attempt, batch)
}

func TestManagerRestartWhileProcessing(t *testing.T) {
	st := newStore(t)
	ns := newNamespace(t, "tenant-d")
	blocked := &blockingStore{Store: st, release: make(chan struct{}), inBatch: make(chan struct{})}
	stopFirst := runInProcess(t, blocked)

	ing := upload(t, st, "d", ns, testenv.Fixture("aws_1500_records.ocsf.json"))
	waitPhase(t, ing, posturev1.IngestionProcessing)
	select {
	case <-blocked.inBatch:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never reached its first batch")
	}
	stopFirst() // the manager goes away mid-run

	run, err := st.GetRun(context.Background(), "d", ing.Name)
	if err != nil || run.Status != store.RunRunning || run.Attempt != 1 {
		t.Fatalf("after the first manager stopped, run = %+v (err %v), want attempt 1 still running", run, err)
	}

	runInProcess(t, st) // a new manager with a new pool
	got := waitPhase(t, ing, posturev1.IngestionCompleted)
	if got.Status.Attempt != 2 {
		t.Errorf("attempt = %d, want 2 (one lost attempt, one new)", got.Status.Attempt)
	}
	if got.Status.Summary != (posturev1.IngestionSummary{Total: 1500, Processed: 1500}) {
		t.Errorf("summary = %+v", got.Status.Summary)
	}
	_, total, err := st.ListFindings(context.Background(), "d", store.FindingQuery{Page: store.Page{Number: 1, Size: 1}})
	if err != nil || total != 1500 {
		t.Errorf("findings = %d (err %v), want exactly 1500: nothing lost, nothing duplicated", total, err)
	}
	reasons := eventReasons(t, ing, 4)
	if !strings.Contains(strings.Join(reasons, ","), "Retrying") {
		t.Errorf("events = %v, want a Retrying event", reasons)
	}
}

// runWithJobs starts a manager whose ingestion controller runs attempts as Jobs.
func runWithJobs(t *testing.T, st store.Store, jobNS string) *controllers.IngestionReconciler {
	t.Helper()
	return runWithJobsWith(t, st, jobNS, nil)
}

// runWithJobsWith is runWithJobs with the reconciler adjusted by tune.
func runWithJobsWith(t *testing.T, st store.Store, jobNS string, tune func(*controllers.IngestionReconciler)) *controllers.IngestionReconciler {
	t.Helper()
	var rec *controllers.IngestionReconciler
	startManager(t, jobNS, func(mgr ctrl.Manager) error {
		rec = &controllers.IngestionReconciler{
			Client: mgr.GetClient(), Store: st,
			Executor: &controllers.JobExecutor{Client: mgr.GetClient(), Config: controllers.WorkerJobConfig{
				Namespace: jobNS, Image: "posture:test", StoreDriver: "postgres", StoreSecret: "posture-store",
			}},
			Recorder: mgr.GetEventRecorder("posture-ingestion"), PollInterval: 100 * time.Millisecond,
		}
		if tune != nil {
			tune(rec)
		}
		return rec.SetupWithManager(mgr)
	})
	return rec
}

func jobsOf(t *testing.T, ns string, ing *posturev1.Ingestion) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{posturev1.LabelIngestion: ing.Name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func waitJob(t *testing.T, ns string, ing *posturev1.Ingestion) *batchv1.Job {
	t.Helper()
	var jobs []batchv1.Job
	testenv.Eventually(t, 30*time.Second, "the ingestion's Job", func() (bool, string) {
		if jobs = jobsOf(t, ns, ing); len(jobs) > 1 {
			t.Fatalf("%d Jobs for one ingestion", len(jobs))
		}
		return len(jobs) == 1, "no Job was created"
	})
	return &jobs[0]
}

// finishJob drives a Job's status the way the Job controller would (there is
// no kubelet here): start time, the terminal condition's precursor, then it.
func finishJob(t *testing.T, job *batchv1.Job, succeeded bool) {
	t.Helper()
	now := metav1.Now()
	job.Status.StartTime = &now
	if succeeded {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &now
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now},
		}
	} else {
		job.Status.Failed = 3
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastProbeTime: now, LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastProbeTime: now, LastTransitionTime: now},
		}
	}
	if err := k8s.Status().Update(context.Background(), job); err != nil {
		t.Fatalf("drive Job status: %v", err)
	}
}

func TestJobExecutorCompletes(t *testing.T) {
	st := newStore(t)
	ns := newNamespace(t, "tenant-e")
	jobNS := newNamespace(t, "posture-system")
	rec := runWithJobs(t, st, jobNS)

	ing := upload(t, st, "e", ns, testenv.Fixture("aws_3_records.ocsf.json"))
	processing := waitPhase(t, ing, posturev1.IngestionProcessing)
	job := waitJob(t, jobNS, ing)
	if processing.Status.JobName != job.Name || job.Name != controllers.WorkerJobName(processing, 1) {
		t.Errorf("status.jobName %q, Job %q, want %q", processing.Status.JobName, job.Name, controllers.WorkerJobName(processing, 1))
	}

	// What the pod would do: the real worker, against the same store.
	w := &ingest.Worker{Store: st, Log: ctrl.Log}
	if err := w.Run(context.Background(), ingest.Attempt{Tenant: "e", IngestionID: ing.Name, BlobID: ing.Spec.Source.Upload.BlobID, Attempt: 1, Total: 3}); err != nil {
		t.Fatal(err)
	}
	finishJob(t, job, true)
	got := waitPhase(t, ing, posturev1.IngestionCompleted)
	if got.Status.Summary != (posturev1.IngestionSummary{Total: 3, Processed: 3}) {
		t.Errorf("summary = %+v", got.Status.Summary)
	}

	// The outcome is recorded, so the Job may now be garbage-collected.
	waitObject(t, client.ObjectKeyFromObject(job), 10*time.Second, "ttlSecondsAfterFinished, set once the result was recorded",
		func(j *batchv1.Job) bool { return j.Spec.TTLSecondsAfterFinished != nil })

	// A terminal ingestion never gets a second Job: not when its Job vanishes
	// (the watch wakes the controller), not when reconciled again by hand.
	// Once the manager's cache has seen the Job go, the watch has woken the
	// controller, and a reconcile from then on sees what that one sees: the
	// one made here returns only when done, so no wait is needed to know
	// what it did.
	if err := k8s.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the manager's cache to see the Job gone", func() (bool, string) {
		err := rec.Client.Get(context.Background(), client.ObjectKeyFromObject(job), &batchv1.Job{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if _, err := rec.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ing)}); err != nil {
		t.Fatal(err)
	}
	if jobs := jobsOf(t, jobNS, ing); len(jobs) > 1 || (len(jobs) == 1 && jobs[0].DeletionTimestamp == nil) {
		t.Errorf("a terminal ingestion got another Job: %v", jobs)
	}
	after := waitPhase(t, ing, posturev1.IngestionCompleted)
	if after.Status.Attempt != 1 {
		t.Errorf("attempt = %d after the terminal phase, want 1", after.Status.Attempt)
	}
}

func TestJobExecutorFails(t *testing.T) {
	st := newStore(t)
	ns := newNamespace(t, "tenant-f")
	jobNS := newNamespace(t, "posture-system")
	runWithJobs(t, st, jobNS)

	ing := upload(t, st, "f", ns, testenv.Fixture("aws_3_records.ocsf.json"))
	waitPhase(t, ing, posturev1.IngestionProcessing)
	job := waitJob(t, jobNS, ing)
	finishJob(t, job, false)

	got := waitPhase(t, ing, posturev1.IngestionFailed)
	if !strings.Contains(got.Status.Message, "BackoffLimitExceeded") {
		t.Errorf("message = %q, want the Job's reason", got.Status.Message)
	}
	if got.Status.CompletedAt == nil || got.Status.Summary.Total != 3 {
		t.Errorf("status = %+v", got.Status)
	}
	errs, _, err := st.ListIngestionErrors(context.Background(), "f", ing.Name, store.Page{Number: 1, Size: 10})
	if err != nil || len(errs) != 1 || errs[0].Code != controllers.CodeWorkerFailed {
		t.Errorf("errors = %+v (err %v), want one %s", errs, err, controllers.CodeWorkerFailed)
	}
	// A worker that turns up late cannot overwrite the recorded failure.
	w := &ingest.Worker{Store: st, Log: ctrl.Log}
	err = w.Run(context.Background(), ingest.Attempt{Tenant: "f", IngestionID: ing.Name, BlobID: ing.Spec.Source.Upload.BlobID, Attempt: 1, Total: 3})
	if err == nil {
		run, _ := st.GetRun(context.Background(), "f", ing.Name)
		if run.Status != store.RunFailed {
			t.Errorf("a late worker changed the run to %+v", run)
		}
	} else if !errors.Is(err, ingest.ErrSuperseded) && !strings.Contains(err.Error(), "stale") {
		t.Logf("late worker: %v", err)
	}
}

func TestSpecIsImmutable(t *testing.T) {
	st := newStore(t)
	ns := newNamespace(t, "tenant-g")
	ing := upload(t, st, "g", ns, testenv.Fixture("aws_3_records.ocsf.json"))
	ing.Spec.RecordCount = 99
	err := k8s.Update(context.Background(), ing)
	if err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("updating the spec: err = %v, want an immutability error", err)
	}
}

var _ = fmt.Sprintf
var _ = os.Getenv
