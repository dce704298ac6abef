package controllers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
)

// stallingStore is a real store whose reports never end: its reader yields
// the whole stored report and then blocks until the reading worker's
// context is cancelled. An in-process attempt on it runs until it is
// cancelled, which is what deleting its Ingestion mid-run must do.
type stallingStore struct {
	store.Store
	stalled   chan struct{} // closed once a worker has read a whole report
	cancelled chan struct{} // closed once a blocked worker was cancelled
	once      [2]sync.Once
}

func newStallingStore(st store.Store) *stallingStore {
	return &stallingStore{Store: st, stalled: make(chan struct{}), cancelled: make(chan struct{})}
}

func (s *stallingStore) OpenBlob(ctx context.Context, tenant, id string) (io.ReadCloser, error) {
	rc, err := s.Store.OpenBlob(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return &stallingBlob{ReadCloser: rc, ctx: ctx, s: s}, nil
}

type stallingBlob struct {
	io.ReadCloser
	ctx context.Context
	s   *stallingStore
}

func (b *stallingBlob) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.s.once[0].Do(func() { close(b.s.stalled) })
		<-b.ctx.Done()
		b.s.once[1].Do(func() { close(b.s.cancelled) })
		return n, b.ctx.Err()
	}
	return n, err
}

// lifecycle runs the controllers that own deletion and retention: Tenant
// (with the store, for a deleted tenant's data), Provider and Ingestion
// (in-process, billing). workerStore is what the worker reads and writes
// through; the controllers use st.
func runLifecycle(t *testing.T, st, workerStore store.Store, grace time.Duration, tune func(*controllers.IngestionReconciler)) {
	t.Helper()
	startManager(t, "default", func(mgr ctrl.Manager) error {
		ctx := context.Background()
		if err := (&controllers.TenantReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			Recorder: mgr.GetEventRecorder("posture-tenant"), RecheckInterval: 200 * time.Millisecond,
			Store: st, DataGracePeriod: grace}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		if err := (&controllers.ProviderReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr); err != nil {
			return err
		}
		// Small batches: a stalled attempt has written findings already.
		worker := &ingest.Worker{Store: workerStore, Log: ctrl.Log.WithName("worker"), ProgressInterval: 10 * time.Millisecond, BatchSize: 100}
		exec, done, err := controllers.NewInProcessExecutor(mgr, worker, 4)
		if err != nil {
			return err
		}
		r := &controllers.IngestionReconciler{
			Client: mgr.GetClient(), Store: st, Executor: exec, Done: done,
			Recorder: mgr.GetEventRecorder("posture-ingestion"), PollInterval: 100 * time.Millisecond,
			Billing: &controllers.Billing{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()},
		}
		if tune != nil {
			tune(r)
		}
		return r.SetupWithManager(mgr)
	})
}

// storeRows is what the store holds for one ingestion.
type storeRows struct {
	report, run bool
	errors      int
	findings    int
}

func rowsOf(t *testing.T, st store.Store, tenant string, ing *posturev1.Ingestion) storeRows {
	t.Helper()
	ctx := context.Background()
	r := storeRows{report: reportExists(t, st, tenant, ing)}
	_, err := st.GetRun(ctx, tenant, ing.Name)
	switch {
	case err == nil:
		r.run = true
	case !errors.Is(err, store.ErrNotFound):
		t.Fatalf("read run %s: %v", ing.Name, err)
	}
	if _, r.errors, err = st.ListIngestionErrors(ctx, tenant, ing.Name, store.Page{Number: 1, Size: 1}); err != nil {
		t.Fatal(err)
	}
	if _, r.findings, err = st.ListFindings(ctx, tenant, store.FindingQuery{IngestionID: ing.Name}); err != nil {
		t.Fatal(err)
	}
	return r
}

func waitGone(t *testing.T, obj client.Object, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("%T %s to be gone", obj, obj.GetName()), func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), fmt.Sprintf("finalizers %v, deletion %v, err %v", obj.GetFinalizers(), obj.GetDeletionTimestamp(), err)
	})
}

func deleteObject(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Delete(context.Background(), obj); err != nil {
		t.Fatalf("delete %T %s: %v", obj, obj.GetName(), err)
	}
}

// Deleting an Ingestion, running or ended, on either executor, stops its
// attempt and deletes its report, run row and error rows; its findings stay.
func TestIngestionDeletionCleansUp(t *testing.T) {
	type setup struct {
		st  store.Store
		ing *posturev1.Ingestion
		tn  string
		// errors: the ingestion has error rows before the deletion.
		errors bool
		// check runs after the deletion finished.
		check func(t *testing.T)
	}
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T) setup
	}{
		{"in-process, mid-run", func(t *testing.T) setup {
			st := newStore(t)
			stalling := newStallingStore(st)
			runLifecycle(t, st, stalling, 0, nil)
			tn := newTenant(t, nil)
			ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
			ing := upload(t, st, tn.Name, ns, testenv.Fixture("aws_1500_records.ocsf.json"))
			<-stalling.stalled
			// Every record is read; the last full batch may still be in
			// flight. Once it lands, the worker is only waiting for more.
			testenv.Eventually(t, 30*time.Second, "the stalled attempt's findings", func() (bool, string) {
				r := rowsOf(t, st, tn.Name, ing)
				return r.findings == 1500, fmt.Sprintf("%+v", r)
			})
			return setup{st: st, ing: ing, tn: tn.Name, check: func(t *testing.T) {
				select {
				case <-stalling.cancelled:
				default:
					t.Error("the Ingestion is gone but its in-process worker was never cancelled")
				}
			}}
		}},
		{"job executor, mid-run", func(t *testing.T) setup {
			st := newStore(t)
			jobNS := newNamespace(t, "posture-system")
			runWithJobsWith(t, st, jobNS, nil)
			ns := newNamespace(t, "tenant-j")
			ing := upload(t, st, "j", ns, testenv.Fixture("aws_3_records.ocsf.json"))
			waitPhase(t, ing, posturev1.IngestionProcessing)
			job := waitJob(t, jobNS, ing)
			// The pod, half-way: a run, a batch of findings and an error row.
			ctx := context.Background()
			if err := st.StartRun(ctx, "j", ing.Name, 1, 3); err != nil {
				t.Fatal(err)
			}
			idx := 1
			f := store.Finding{UID: "f-1", ScanID: "scan-1", ProviderType: "aws", ProviderUID: "123456789012", Time: time.Now(), Raw: []byte(`{}`)}
			if err := st.WriteBatch(ctx, "j", ing.Name, 1, store.Batch{Findings: []store.Finding{f},
				Errors: []store.IngestionError{{RecordIndex: &idx, Code: "missing_field"}}}); err != nil {
				t.Fatal(err)
			}
			return setup{st: st, ing: ing, tn: "j", errors: true, check: func(t *testing.T) {
				var got = job.DeepCopy()
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), got); !apierrors.IsNotFound(err) {
					t.Errorf("Job %s of the deleted ingestion: %v (deletion %v); want it deleted", job.Name, err, got.DeletionTimestamp)
				}
			}}
		}},
		{"ended, report retained", func(t *testing.T) setup {
			st := newStore(t)
			runLifecycle(t, st, st, 0, func(r *controllers.IngestionReconciler) { r.ReportRetention = time.Hour })
			tn := newTenant(t, nil)
			ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
			ing := upload(t, st, tn.Name, ns, withInvalidRecord(t))
			waitPhase(t, ing, posturev1.IngestionCompleted)
			return setup{st: st, ing: ing, tn: tn.Name, errors: true}
		}},
		{"declared in a ConfigMap, ended, report retained", func(t *testing.T) setup {
			st := newStore(t)
			runLifecycle(t, st, st, 0, func(r *controllers.IngestionReconciler) { r.ReportRetention = time.Hour })
			tn := newTenant(t, nil)
			ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
			report, err := os.ReadFile(withInvalidRecord(t))
			if err != nil {
				t.Fatal(err)
			}
			create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: ns}, Data: map[string]string{"r.ocsf.json": string(report)}})
			ing := &posturev1.Ingestion{ObjectMeta: metav1.ObjectMeta{Name: "declared", Namespace: ns},
				Spec: posturev1.IngestionSpec{Source: posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "report", Key: "r.ocsf.json"}}}}
			create(t, ing)
			// The stored copy of a declared report is named in status.
			ing = waitFor(t, ing, 30*time.Second, "completed", func(i *posturev1.Ingestion) bool { return i.Status.Phase == posturev1.IngestionCompleted })
			return setup{st: st, ing: ing, tn: tn.Name, errors: true}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.prepare(t)
			before := rowsOf(t, s.st, s.tn, s.ing)
			if !before.report || !before.run || (before.errors > 0) != s.errors || before.findings == 0 {
				t.Fatalf("before the deletion the store holds %+v; the test needs a report, a run, error rows and findings", before)
			}
			waitFor(t, s.ing, 10*time.Second, "the finalizer", func(i *posturev1.Ingestion) bool {
				return len(i.Finalizers) == 1 && i.Finalizers[0] == controllers.FinalizerIngestion
			})
			deleteObject(t, s.ing)
			waitGone(t, s.ing, 30*time.Second)
			after := rowsOf(t, s.st, s.tn, s.ing)
			if want := (storeRows{findings: before.findings}); after != want {
				t.Errorf("after the deletion the store holds %+v, want %+v: no report, run or error rows, the findings kept", after, want)
			}
			if s.check != nil {
				s.check(t)
			}
		})
	}
}

// withInvalidRecord is a real scanner report with one invalid record put
// first, so that its ingestion leaves findings and an error row.
func withInvalidRecord(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(testenv.Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var records []json.RawMessage
	if err := json.Unmarshal(raw, &records); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(append([]json.RawMessage{json.RawMessage(`{"class_uid":2004}`)}, records...))
	return writeTemp(t, "report.ocsf.json", string(b))
}

// Ended Ingestions beyond the tenant's history limit are deleted, oldest
// first, and their finalizer deletes their rows; the newest ones stay.
func TestIngestionHistoryLimit(t *testing.T) {
	st := newStore(t)
	runLifecycle(t, st, st, 0, nil)
	for _, tc := range []struct {
		name    string
		history posturev1.IngestionHistory
		uploads int
		kept    int // the newest this many stay
	}{
		{"maxCount keeps the newest", posturev1.IngestionHistory{MaxCount: ptrTo[int32](2)}, 4, 2},
		{"maxCount 0 keeps none", posturev1.IngestionHistory{MaxCount: ptrTo[int32](0)}, 2, 0},
		{"maxAge", posturev1.IngestionHistory{MaxAge: &metav1.Duration{Duration: 2 * time.Second}}, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTenant(t, func(tn *posturev1.Tenant) { tn.Spec.IngestionHistory = &tc.history })
			ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
			var ings []*posturev1.Ingestion
			for i := range tc.uploads {
				// An account each, so no ingestion rewrites another's findings.
				ing := upload(t, st, tn.Name, ns, accountsReport(t, 3, fmt.Sprintf("9%011d", i)))
				// Only ended Ingestions are pruned, so one already gone has
				// ended too (with maxCount 0 that can be before it is seen).
				testenv.Eventually(t, 30*time.Second, "ingestion "+ing.Name+" to end", func() (bool, string) {
					var got posturev1.Ingestion
					err := k8s.Get(context.Background(), client.ObjectKeyFromObject(ing), &got)
					if apierrors.IsNotFound(err) {
						return true, "pruned"
					}
					return err == nil && got.Status.Phase.Terminal(), fmt.Sprintf("phase %q, err %v", got.Status.Phase, err)
				})
				ings = append(ings, ing)
				if i < tc.uploads-1 {
					// Ends are recorded to the second: the next one ends in
					// a later second than this one did.
					ended := time.Now()
					if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(ing), ing); err == nil && ing.Status.CompletedAt != nil {
						ended = ing.Status.CompletedAt.Time
					}
					testenv.Eventually(t, 5*time.Second, "a second later than the last end", func() (bool, string) {
						return time.Now().Unix() > ended.Unix(), "still the second the ingestion ended in"
					})
				}
			}
			pruned, kept := ings[:tc.uploads-tc.kept], ings[tc.uploads-tc.kept:]
			for _, ing := range pruned {
				waitGone(t, ing, 30*time.Second)
				if r := rowsOf(t, st, tn.Name, ing); r.run || r.report || r.findings != 3 {
					t.Errorf("pruned ingestion %s left %+v; want no run or report, its 3 findings kept", ing.Name, r)
				}
			}
			for _, ing := range kept {
				if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(ing), ing); err != nil || !ing.DeletionTimestamp.IsZero() {
					t.Errorf("ingestion %s within the history limit: %v, deletion %v; want it kept", ing.Name, err, ing.DeletionTimestamp)
				}
			}
		})
	}
}

// The history limit leaves declared Ingestions to their manifests: a GitOps
// tool would apply a deleted one again, and it would be imported again.
func TestIngestionHistoryKeepsDeclaredIngestions(t *testing.T) {
	st := newStore(t)
	runLifecycle(t, st, st, 0, nil)
	tn := newTenant(t, func(tn *posturev1.Tenant) {
		tn.Spec.IngestionHistory = &posturev1.IngestionHistory{MaxCount: ptrTo[int32](0)}
	})
	ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: ns}, Data: map[string]string{"r.ocsf.json": string(smallReport(t))}})
	kept := declaredIngestion(ns, "nightly-2026-11-27", posturev1.IngestionSource{ConfigMapRef: &posturev1.ReportKeyRef{Name: "report", Key: "r.ocsf.json"}})
	create(t, kept)
	waitPhase(t, kept, posturev1.IngestionCompleted)
	// An upload that ends is pruned (maxCount 0): the history limit has run.
	pruned := upload(t, st, tn.Name, ns, accountsReport(t, 3, "987654321000"))
	waitGone(t, pruned, 30*time.Second)
	// The reconcile that deleted the upload listed the declared one, which
	// had ended before the upload was made, and deletes in the same pass.
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(kept), kept); err != nil || !kept.DeletionTimestamp.IsZero() {
		t.Errorf("declared ingestion %s: %v, deletion %v; want it kept", kept.Name, err, kept.DeletionTimestamp)
	}
}

func ptrTo[T any](v T) *T { return &v }

// Deleting a Tenant keeps its data through the grace period, then deletes
// all of it; another tenant's data stays.
func TestTenantDataDeletedAfterGrace(t *testing.T) {
	st := newStore(t)
	const grace = 3 * time.Second
	runLifecycle(t, st, st, grace, func(r *controllers.IngestionReconciler) { r.ReportRetention = time.Hour })
	type tenantData struct {
		tn  *posturev1.Tenant
		ing *posturev1.Ingestion
	}
	var tenants []tenantData
	for range 2 {
		tn := newTenant(t, nil)
		ns := waitTenant(t, tn.Name, "Ready", tenantReady(metav1.ConditionTrue, "")).Status.Namespace
		waitTenant(t, tn.Name, "the finalizer", func(t *posturev1.Tenant) bool { return len(t.Finalizers) == 1 })
		ing := upload(t, st, tn.Name, ns, testenv.Fixture("aws_3_records.ocsf.json"))
		waitPhase(t, ing, posturev1.IngestionCompleted)
		tenants = append(tenants, tenantData{tn, ing})
	}
	gone, other := tenants[0], tenants[1]
	deleteObject(t, gone.tn)

	// Within the grace period nothing is deleted. The tenant controller
	// has one worker and takes Tenants in the order their events came: once
	// a Tenant created after the deletion is Ready, the deleted one has
	// been reconciled.
	marker := newTenant(t, nil)
	waitTenant(t, marker.Name, "Ready", tenantReady(metav1.ConditionTrue, ""))
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: gone.tn.Name}, gone.tn); err != nil || gone.tn.DeletionTimestamp.IsZero() {
		t.Fatalf("Tenant within its grace period: %v, deletion %v; want it waiting", err, gone.tn.DeletionTimestamp)
	}
	if r := rowsOf(t, st, gone.tn.Name, gone.ing); !r.report || !r.run || r.findings != 3 {
		t.Fatalf("within the grace period the store holds %+v; want everything", r)
	}

	deleted := gone.tn.DeletionTimestamp.Time
	waitGone(t, gone.tn, 30*time.Second)
	if waited := time.Since(deleted); waited < grace {
		t.Errorf("the Tenant went %s after its deletion, before its grace period of %s", waited, grace)
	}
	if r := rowsOf(t, st, gone.tn.Name, gone.ing); r != (storeRows{}) {
		t.Errorf("after the grace period the deleted tenant keeps %+v; want nothing", r)
	}
	if _, n, err := st.ListScans(context.Background(), gone.tn.Name, store.ScanQuery{}); err != nil || n != 0 {
		t.Errorf("scans of the deleted tenant: %d (%v), want 0", n, err)
	}
	if r := rowsOf(t, st, other.tn.Name, other.ing); !r.report || !r.run || r.findings != 3 {
		t.Errorf("the other tenant keeps %+v; want its report, run and 3 findings", r)
	}
}
