package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

func getRun(t *testing.T, s store.Store, tenant, id string) store.Run {
	t.Helper()
	r, err := s.GetRun(context.Background(), tenant, id)
	must(t, err, "GetRun")
	checkUTC(t, "StartedAt", r.StartedAt)
	checkUTC(t, "UpdatedAt", r.UpdatedAt)
	if r.FinishedAt != nil {
		checkUTC(t, "FinishedAt", *r.FinishedAt)
	}
	return r
}

func testRunLifecycle(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	_, err := s.GetRun(ctx, tenantA, "ing-1")
	wantErr(t, err, store.ErrNotFound, "GetRun before StartRun")
	wantErr(t, s.UpdateRun(ctx, tenantA, "ing-1", 1, store.Progress{}), store.ErrNotFound, "UpdateRun before StartRun")
	wantErr(t, s.FinishRun(ctx, tenantA, "ing-1", 1, store.Outcome{Status: store.RunSucceeded}), store.ErrNotFound, "FinishRun before StartRun")

	before := time.Now().Add(-time.Second)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 100), "StartRun")
	r := getRun(t, s, tenantA, "ing-1")
	if r.IngestionID != "ing-1" || r.Attempt != 1 || r.Status != store.RunRunning || r.Total != 100 ||
		r.Processed != 0 || r.Invalid != 0 || r.Message != "" || r.FinishedAt != nil {
		t.Fatalf("after StartRun: %+v", r)
	}
	if r.StartedAt.Before(before) || r.StartedAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("StartedAt %v is not now", r.StartedAt)
	}

	time.Sleep(2 * time.Millisecond)
	must(t, s.UpdateRun(ctx, tenantA, "ing-1", 1, store.Progress{Processed: 40, Invalid: 3}), "UpdateRun")
	r2 := getRun(t, s, tenantA, "ing-1")
	if r2.Processed != 40 || r2.Invalid != 3 || r2.Status != store.RunRunning || r2.Total != 100 {
		t.Fatalf("after UpdateRun: %+v", r2)
	}
	if !r2.UpdatedAt.After(r.UpdatedAt) || !r2.StartedAt.Equal(r.StartedAt) {
		t.Fatalf("UpdateRun: updated_at %v -> %v, started_at %v -> %v", r.UpdatedAt, r2.UpdatedAt, r.StartedAt, r2.StartedAt)
	}

	must(t, s.FinishRun(ctx, tenantA, "ing-1", 1, store.Outcome{
		Status: store.RunFailed, Progress: store.Progress{Processed: 60, Invalid: 60}, Message: "no valid records"}), "FinishRun")
	r3 := getRun(t, s, tenantA, "ing-1")
	if r3.Status != store.RunFailed || r3.Processed != 60 || r3.Invalid != 60 || r3.Message != "no valid records" ||
		r3.FinishedAt == nil || r3.FinishedAt.Before(r2.UpdatedAt) || r3.Total != 100 || r3.Attempt != 1 {
		t.Fatalf("after FinishRun: %+v", r3)
	}

	// Finished means finished, for every writer of that attempt.
	wantErr(t, s.FinishRun(ctx, tenantA, "ing-1", 1, store.Outcome{Status: store.RunSucceeded}), store.ErrStaleAttempt, "FinishRun twice")
	wantErr(t, s.UpdateRun(ctx, tenantA, "ing-1", 1, store.Progress{Processed: 1}), store.ErrStaleAttempt, "UpdateRun after finish")
	wantErr(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, batchOf(finding("scan-1", "u1"))), store.ErrStaleAttempt, "WriteBatch after finish")
	if r4 := getRun(t, s, tenantA, "ing-1"); !reflect.DeepEqual(r4, r3) {
		t.Fatalf("stale writes changed the run: %+v, was %+v", r4, r3)
	}
	expectFindings(t, s, tenantA, store.FindingQuery{}, 0)

	// A later attempt may start over a finished run.
	must(t, s.StartRun(ctx, tenantA, "ing-1", 2, 50), "StartRun attempt 2 after finish")
	r5 := getRun(t, s, tenantA, "ing-1")
	if r5.Attempt != 2 || r5.Status != store.RunRunning || r5.Total != 50 || r5.Processed != 0 ||
		r5.Invalid != 0 || r5.Message != "" || r5.FinishedAt != nil {
		t.Fatalf("after restart: %+v", r5)
	}
	must(t, s.FinishRun(ctx, tenantA, "ing-1", 2, store.Outcome{Status: store.RunSucceeded, Progress: store.Progress{Processed: 50}}), "FinishRun attempt 2")
	if r6 := getRun(t, s, tenantA, "ing-1"); r6.Status != store.RunSucceeded || r6.Message != "" {
		t.Fatalf("after FinishRun attempt 2: %+v", r6)
	}
}

func testRunStaleAttempts(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 10), "StartRun 1")
	must(t, s.UpdateRun(ctx, tenantA, "ing-1", 1, store.Progress{Processed: 5, Invalid: 1}), "UpdateRun 1")
	idx := 0
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{
		Findings: []store.Finding{finding("scan-1", "old")},
		Errors:   []store.IngestionError{{RecordIndex: &idx, Code: "missing_field", Detail: "from attempt 1"}},
	}), "WriteBatch 1")

	// An attempt that was never started is as stale as an old one.
	wantErr(t, s.UpdateRun(ctx, tenantA, "ing-1", 2, store.Progress{}), store.ErrStaleAttempt, "UpdateRun of unstarted attempt")
	wantErr(t, s.WriteBatch(ctx, tenantA, "ing-1", 2, batchOf(finding("scan-1", "x"))), store.ErrStaleAttempt, "WriteBatch of unstarted attempt")

	must(t, s.StartRun(ctx, tenantA, "ing-1", 2, 12), "StartRun 2")
	r := getRun(t, s, tenantA, "ing-1")
	if r.Attempt != 2 || r.Processed != 0 || r.Invalid != 0 || r.Total != 12 || r.Status != store.RunRunning {
		t.Fatalf("after StartRun 2: %+v", r)
	}
	errs, n, err := s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{})
	must(t, err, "ListIngestionErrors")
	if n != 0 || len(errs) != 0 {
		t.Fatalf("attempt 1's error rows survived StartRun 2: %d rows %+v", n, errs)
	}

	wantErr(t, s.StartRun(ctx, tenantA, "ing-1", 1, 10), store.ErrStaleAttempt, "StartRun of older attempt")
	wantErr(t, s.UpdateRun(ctx, tenantA, "ing-1", 1, store.Progress{Processed: 9}), store.ErrStaleAttempt, "UpdateRun old attempt")
	wantErr(t, s.FinishRun(ctx, tenantA, "ing-1", 1, store.Outcome{Status: store.RunSucceeded}), store.ErrStaleAttempt, "FinishRun old attempt")
	wantErr(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{
		Findings: []store.Finding{finding("scan-1", "late")},
		Scans:    []store.Scan{{ID: "scan-late"}},
		Errors:   []store.IngestionError{{Code: "late"}},
	}), store.ErrStaleAttempt, "WriteBatch old attempt")

	if r2 := getRun(t, s, tenantA, "ing-1"); !reflect.DeepEqual(r2, r) {
		t.Fatalf("stale writes changed the run: %+v, was %+v", r2, r)
	}
	expectFindings(t, s, tenantA, store.FindingQuery{}, 1) // only "old"
	if _, err := s.GetFinding(ctx, tenantA, store.FindingID(tenantA, "scan-1", "late")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("stale WriteBatch stored a finding: %v", err)
	}
	scans, _, err := s.ListScans(ctx, tenantA, store.ScanQuery{})
	must(t, err, "ListScans")
	if len(scans) != 0 {
		t.Fatalf("stale WriteBatch stored scans: %+v", scans)
	}
	_, n, err = s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{})
	must(t, err, "ListIngestionErrors")
	if n != 0 {
		t.Fatalf("stale WriteBatch stored %d error rows", n)
	}

	// The current attempt is unaffected by the stale writers.
	must(t, s.UpdateRun(ctx, tenantA, "ing-1", 2, store.Progress{Processed: 12}), "UpdateRun 2")
	must(t, s.FinishRun(ctx, tenantA, "ing-1", 2, store.Outcome{Status: store.RunSucceeded, Progress: store.Progress{Processed: 12}}), "FinishRun 2")
}

// IngestionErrorCodes counts the current attempt's rows of one ingestion of
// one tenant, by code, job-level rows included.
func testIngestionErrorCodes(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	codes, err := s.IngestionErrorCodes(ctx, tenantA, "ing-1")
	must(t, err, "IngestionErrorCodes before any run")
	if len(codes) != 0 {
		t.Fatalf("IngestionErrorCodes of an unknown ingestion = %v, want none", codes)
	}
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 10), "StartRun A")
	must(t, s.StartRun(ctx, tenantB, "ing-1", 1, 10), "StartRun B")
	i0, i1, i2 := 0, 1, 2
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{Errors: []store.IngestionError{
		{RecordIndex: &i0, Code: "missing_field"}, {RecordIndex: &i1, Code: "missing_field"},
		{RecordIndex: &i2, Code: "invalid_value"}, {Code: "worker_failed"},
	}}), "WriteBatch A")
	must(t, s.WriteBatch(ctx, tenantB, "ing-1", 1, store.Batch{Errors: []store.IngestionError{{RecordIndex: &i0, Code: "other_tenant"}}}), "WriteBatch B")
	codes, err = s.IngestionErrorCodes(ctx, tenantA, "ing-1")
	must(t, err, "IngestionErrorCodes")
	if want := map[string]int{"missing_field": 2, "invalid_value": 1, "worker_failed": 1}; !reflect.DeepEqual(codes, want) {
		t.Fatalf("IngestionErrorCodes = %v, want %v", codes, want)
	}
}

func testRunRestartSameAttempt(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 3, 10), "StartRun")
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 3, store.Batch{Errors: []store.IngestionError{{Code: "c1"}, {Code: "c2"}}}), "WriteBatch")
	must(t, s.UpdateRun(ctx, tenantA, "ing-1", 3, store.Progress{Processed: 7}), "UpdateRun")
	// A worker that restarts with the same attempt number (same Job, new pod)
	// must not see its own earlier error rows twice.
	must(t, s.StartRun(ctx, tenantA, "ing-1", 3, 10), "StartRun same attempt")
	r := getRun(t, s, tenantA, "ing-1")
	if r.Attempt != 3 || r.Processed != 0 || r.Status != store.RunRunning {
		t.Fatalf("after restart: %+v", r)
	}
	_, n, err := s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{})
	must(t, err, "ListIngestionErrors")
	if n != 0 {
		t.Fatalf("%d error rows survived the restart", n)
	}
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 3, store.Batch{Errors: []store.IngestionError{{Code: "c1"}, {Code: "c2"}}}), "WriteBatch again")
	_, n, err = s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{})
	must(t, err, "ListIngestionErrors")
	if n != 2 {
		t.Fatalf("%d error rows, want 2", n)
	}
	// Once finished, the same attempt cannot reopen the run: a pod that turns
	// up after its outcome was recorded must not undo it.
	must(t, s.FinishRun(ctx, tenantA, "ing-1", 3, store.Outcome{Status: store.RunFailed, Message: "gave up"}), "FinishRun")
	wantErr(t, s.StartRun(ctx, tenantA, "ing-1", 3, 10), store.ErrStaleAttempt, "StartRun same attempt after finish")
	if r := getRun(t, s, tenantA, "ing-1"); r.Status != store.RunFailed || r.Message != "gave up" {
		t.Fatalf("a late StartRun changed the finished run: %+v", r)
	}
}

func testRunTenantIsolation(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 10), "StartRun A")
	_, err := s.GetRun(ctx, tenantB, "ing-1")
	wantErr(t, err, store.ErrNotFound, "GetRun by other tenant")
	wantErr(t, s.UpdateRun(ctx, tenantB, "ing-1", 1, store.Progress{Processed: 1}), store.ErrNotFound, "UpdateRun by other tenant")
	wantErr(t, s.FinishRun(ctx, tenantB, "ing-1", 1, store.Outcome{Status: store.RunFailed}), store.ErrNotFound, "FinishRun by other tenant")
	wantErr(t, s.WriteBatch(ctx, tenantB, "ing-1", 1, batchOf(finding("scan-1", "u"))), store.ErrNotFound, "WriteBatch by other tenant")

	// The same ingestion id in another tenant is a different run.
	must(t, s.StartRun(ctx, tenantB, "ing-1", 5, 99), "StartRun B")
	must(t, s.StartRun(ctx, tenantA, "ing-1", 2, 10), "StartRun A attempt 2 despite B's attempt 5")
	if a, b := getRun(t, s, tenantA, "ing-1"), getRun(t, s, tenantB, "ing-1"); a.Attempt != 2 || b.Attempt != 5 || b.Total != 99 {
		t.Fatalf("runs leak across tenants: A %+v, B %+v", a, b)
	}
}

func testRunInvalidOutcome(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 1), "StartRun")
	for _, st := range []store.RunStatus{"", store.RunRunning, "done"} {
		err := s.FinishRun(ctx, tenantA, "ing-1", 1, store.Outcome{Status: st})
		wantErr(t, err, store.ErrInvalidArgument, fmt.Sprintf("FinishRun(status %q)", st))
	}
	if r := getRun(t, s, tenantA, "ing-1"); r.FinishedAt != nil {
		t.Fatalf("rejected outcome finished the run: %+v", r)
	}
}

// testStartRunFences races a writer of attempt 1 against StartRun(2): once
// StartRun returns, no row of attempt 1 may exist or appear, or a retried
// ingestion would report errors twice.
func testStartRunFences(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 0), "StartRun 1")
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			err := s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{
				Errors: []store.IngestionError{{Code: "old", Detail: fmt.Sprint(i)}, {Code: "old"}},
			})
			if i == 3 {
				close(started)
			}
			if err != nil {
				if i < 3 {
					close(started)
				}
				done <- err
				return
			}
		}
	}()
	<-started
	must(t, s.StartRun(ctx, tenantA, "ing-1", 2, 0), "StartRun 2")
	wantErr(t, <-done, store.ErrStaleAttempt, "old writer after StartRun 2")
	_, n, err := s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{})
	must(t, err, "ListIngestionErrors")
	if n != 0 {
		t.Fatalf("%d error rows of attempt 1 outlived StartRun 2", n)
	}
}
