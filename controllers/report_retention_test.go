package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
)

// reportExists tells whether the ingestion's uploaded report is still stored.
func reportExists(t *testing.T, st store.Store, tenant string, ing *posturev1.Ingestion) bool {
	t.Helper()
	id := ""
	if up := ing.Spec.Source.Upload; up != nil {
		id = up.BlobID
	} else if rep := ing.Status.Report; rep != nil {
		id = rep.BlobID
	}
	if id == "" {
		t.Fatalf("ingestion %s names no stored report", ing.Name)
	}
	rc, err := st.OpenBlob(context.Background(), tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatalf("open report: %v", err)
	}
	rc.Close()
	return true
}

// A report is stored for its ingestion's worker alone: once the ingestion
// has ended, completed or failed, on either executor, the controller deletes
// it, unless the retention setting keeps it for a while.
func TestReportDeletedOnceIngestionEnds(t *testing.T) {
	tests := []struct {
		name      string
		jobs      bool   // Job executor (the test plays the pod); else in-process
		report    string // "" is the 3-record fixture
		succeed   bool   // Job executor: the Job's outcome
		retention time.Duration
		phase     posturev1.IngestionPhase
		kept      bool
	}{
		{name: "in-process completed", phase: posturev1.IngestionCompleted},
		{name: "in-process failed", report: "[]", phase: posturev1.IngestionFailed},
		{name: "job completed", jobs: true, succeed: true, phase: posturev1.IngestionCompleted},
		{name: "job failed", jobs: true, phase: posturev1.IngestionFailed},
		{name: "retention keeps a completed report", retention: time.Hour, phase: posturev1.IngestionCompleted, kept: true},
		{name: "retention keeps a failed report", report: "[]", retention: time.Hour, phase: posturev1.IngestionFailed, kept: true},
		{name: "retention elapses", retention: 2 * time.Second, phase: posturev1.IngestionCompleted},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			tenant := fmt.Sprintf("r%d", i)
			ns := newNamespace(t, "tenant-"+tenant)
			var rec *controllers.IngestionReconciler
			tune := func(r *controllers.IngestionReconciler) { r.ReportRetention, rec = tc.retention, r }
			var jobNS string
			if tc.jobs {
				jobNS = newNamespace(t, "posture-system")
				runWithJobsWith(t, st, jobNS, tune)
			} else {
				runInProcessWith(t, st, tune)
			}
			path := testenv.Fixture("aws_3_records.ocsf.json")
			if tc.report != "" {
				path = writeTemp(t, "report.ocsf.json", tc.report)
			}
			ing := upload(t, st, tenant, ns, path)
			if tc.jobs {
				waitPhase(t, ing, posturev1.IngestionProcessing)
				job := waitJob(t, jobNS, ing)
				if tc.succeed {
					w := &ingest.Worker{Store: st, Log: ctrl.Log}
					if err := w.Run(context.Background(), ingest.Attempt{Tenant: tenant, IngestionID: ing.Name, BlobID: ing.Spec.Source.Upload.BlobID, Attempt: 1, Total: 3}); err != nil {
						t.Fatal(err)
					}
				}
				finishJob(t, job, tc.succeed)
			}
			waitPhase(t, ing, tc.phase)

			if tc.kept {
				// A wrongly eager deletion would have happened by the end
				// of a reconcile after the terminal write.
				reconcileSeen(t, rec, ing, func(i *posturev1.Ingestion) bool { return i.Status.Phase == tc.phase })
				if !reportExists(t, st, tenant, ing) {
					t.Fatalf("the report was deleted although --report-retention is %v", tc.retention)
				}
				return
			}
			testenv.Eventually(t, tc.retention+15*time.Second, "the report of the "+strings.ToLower(string(tc.phase))+" ingestion deleted", func() (bool, string) {
				return !reportExists(t, st, tenant, ing), "still stored"
			})
			blobs, chunks, err := st.(interface {
				CountBlobs(context.Context, string) (int, int, error)
			}).CountBlobs(context.Background(), tenant)
			if err != nil || blobs != 0 || chunks != 0 {
				t.Fatalf("%d blob rows and %d chunk rows left (err %v), want none", blobs, chunks, err)
			}
		})
	}
}

// bumpingStore changes the Ingestion (an annotation, as a user's kubectl
// annotate would) each time the controller reads a finished run, the first
// `bumps` times: the controller then writes the terminal status from an
// object that is provably out of date, which the API server refuses with a
// conflict.
type bumpingStore struct {
	store.Store
	t         *testing.T
	namespace string
	mu        sync.Mutex
	bumps     int
}

func (b *bumpingStore) GetRun(ctx context.Context, tenant, id string) (store.Run, error) {
	run, err := b.Store.GetRun(ctx, tenant, id)
	if err != nil || run.Status == store.RunRunning {
		return run, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bumps == 0 {
		return run, nil
	}
	b.bumps--
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"example.com/touched":"%d"}}}`, b.bumps)
	ing := &posturev1.Ingestion{}
	ing.Namespace, ing.Name = b.namespace, id
	if err := k8s.Patch(ctx, ing, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		b.t.Errorf("annotate the Ingestion: %v", err)
	}
	return run, nil
}

// logLines records what a manager logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *logLines) matching(fragments ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		for _, f := range fragments {
			if strings.Contains(line, f) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// An Ingestion that changes while the controller works on it (here, twice
// right before its terminal status is written) is routine: the controller
// retries from the newer version and logs no error.
func TestStatusConflictsAreNotErrors(t *testing.T) {
	st := newStore(t)
	ns := newNamespace(t, "tenant-conflict")
	bumping := &bumpingStore{Store: st, t: t, namespace: ns, bumps: 2}
	logs := &logLines{}
	runInProcessWith(t, bumping, nil, func(o *ctrl.Options) {
		o.Logger = funcr.New(logs.add, funcr.Options{})
	})

	ing := upload(t, st, "conflict", ns, testenv.Fixture("aws_1500_records.ocsf.json"))
	got := waitPhase(t, ing, posturev1.IngestionCompleted)
	if got.Status.Summary != (posturev1.IngestionSummary{Total: 1500, Processed: 1500}) {
		t.Errorf("summary = %+v, want 1500/1500/0", got.Status.Summary)
	}
	if got.Annotations["example.com/touched"] != "0" {
		t.Fatalf("the Ingestion was not changed twice under the controller (annotations %v): the test proves nothing", got.Annotations)
	}
	if reasons := eventReasons(t, ing, 3); strings.Join(reasons, ",") != "Pending,Processing,Completed" {
		t.Errorf("events = %v, want Pending, Processing, Completed, each once", reasons)
	}
	if bad := logs.matching("Reconciler error", "the object has been modified", `"error"=`); len(bad) > 0 {
		t.Errorf("the manager logged %d errors for routine conflicts:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}
