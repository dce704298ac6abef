package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/sqlite"
	"github.com/posture-dev/posture/internal/testenv"
)

func newStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// record is a minimal valid Detection Finding for one AWS account.
func record(uid, account string) string {
	return fmt.Sprintf(`{"class_uid":2004,"activity_id":1,"category_uid":2,"type_uid":200401,"time":1739000000,
"severity_id":3,"severity":"Medium","status_code":"FAIL","metadata":{"version":"1.4.0","event_code":"check_a","product":{"name":"scanner"}},
"finding_info":{"uid":%q,"title":"t"},"cloud":{"provider":"aws","account":{"uid":%q}}}`, uid, account)
}

func report(records ...string) string { return "[" + strings.Join(records, ",") + "]" }

func put(t *testing.T, st store.Store, content string) store.Blob {
	t.Helper()
	b, err := st.PutBlob(context.Background(), "t1", strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func run(t *testing.T, w *ingest.Worker, job ingest.Attempt) (store.Run, []store.IngestionError) {
	t.Helper()
	err := w.Run(context.Background(), job)
	var failed *ingest.FailedError
	if err != nil && !errors.As(err, &failed) {
		t.Fatalf("run: %v", err)
	}
	r, err := w.Store.GetRun(context.Background(), job.Tenant, job.IngestionID)
	if err != nil {
		t.Fatal(err)
	}
	errs, _, err := w.Store.(store.IngestionErrors).ListIngestionErrors(context.Background(), job.Tenant, job.IngestionID, store.Page{Number: 1, Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	return r, errs
}

func TestWorkerOutcomes(t *testing.T) {
	invalid := `{"class_uid":2004}`
	for _, tc := range []struct {
		name               string
		content            string
		allowed            map[string]bool
		status             store.RunStatus
		processed, invalid int
		wantCodes          []string
	}{
		{"all valid", report(record("a", "111111111111"), record("b", "111111111111")), nil, store.RunSucceeded, 2, 0, nil},
		{"some invalid", report(record("a", "111111111111"), invalid), nil, store.RunSucceeded, 2, 1, []string{"missing_field"}},
		{"none valid", report(invalid), nil, store.RunFailed, 1, 1, []string{"missing_field", ingest.CodeNoRecords}},
		{"empty array", "[]", nil, store.RunFailed, 0, 0, []string{ingest.CodeNoRecords}},
		{"account over the plan", report(record("a", "111111111111"), record("b", "222222222222")),
			map[string]bool{"aws/111111111111": true}, store.RunSucceeded, 2, 1, []string{ingest.CodeProviderLimit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			blob := put(t, st, tc.content)
			w := &ingest.Worker{Store: st, Log: logr.Discard(), BatchSize: 1}
			r, errs := run(t, w, ingest.Attempt{Tenant: "t1", IngestionID: "ing", BlobID: blob.ID, Attempt: 1, AllowedAccounts: tc.allowed})
			if r.Status != tc.status || r.Processed != tc.processed || r.Invalid != tc.invalid {
				t.Errorf("run = %+v, want %s %d/%d", r, tc.status, tc.processed, tc.invalid)
			}
			codes := map[string]bool{}
			for _, e := range errs {
				codes[e.Code] = true
			}
			for _, c := range tc.wantCodes {
				if !codes[c] {
					t.Errorf("no %s error in %+v", c, errs)
				}
			}
			if len(tc.wantCodes) == 0 && len(errs) != 0 {
				t.Errorf("unexpected errors %+v", errs)
			}
		})
	}
}

// The error rows are capped, but every invalid record is still counted and the
// last row says rows were left out.
func TestWorkerCapsErrorRows(t *testing.T) {
	st := newStore(t)
	var recs []string
	recs = append(recs, record("ok", "111111111111"))
	for i := 0; i < 20; i++ {
		recs = append(recs, `{"class_uid":3002}`)
	}
	blob := put(t, st, report(recs...))
	w := &ingest.Worker{Store: st, Log: logr.Discard(), MaxErrorRows: 5}
	r, errs := run(t, w, ingest.Attempt{Tenant: "t1", IngestionID: "ing", BlobID: blob.ID, Attempt: 1})
	if r.Invalid != 20 || r.Processed != 21 {
		t.Errorf("run = %+v, want 21 processed, 20 invalid", r)
	}
	notes := 0
	for _, e := range errs {
		if e.Code == ingest.CodeTruncated && e.RecordIndex == nil {
			notes++
		}
	}
	if len(errs) != 5 || notes != 1 {
		t.Errorf("errors = %+v, want 4 record errors and one ingestion-level truncation note", errs)
	}
}

// A worker of an older attempt stops without writing once a newer one started.
func TestWorkerSuperseded(t *testing.T) {
	st := newStore(t)
	blob := put(t, st, report(record("a", "111111111111")))
	if err := st.StartRun(context.Background(), "t1", "ing", 2, 1); err != nil {
		t.Fatal(err)
	}
	w := &ingest.Worker{Store: st, Log: logr.Discard()}
	if err := w.Run(context.Background(), ingest.Attempt{Tenant: "t1", IngestionID: "ing", BlobID: blob.ID, Attempt: 1}); !errors.Is(err, ingest.ErrSuperseded) {
		t.Fatalf("err = %v, want ErrSuperseded", err)
	}
	if r, _ := st.GetRun(context.Background(), "t1", "ing"); r.Attempt != 2 || r.Status != store.RunRunning || r.Processed != 0 {
		t.Errorf("the stale worker changed the run: %+v", r)
	}
}

// Records without a scan id land on a scan derived from the report's hash, so
// the same report ingested twice rewrites the same findings.
func TestWorkerSameReportSameFindings(t *testing.T) {
	st := newStore(t)
	blob := put(t, st, report(record("a", "111111111111"), record("b", "111111111111")))
	w := &ingest.Worker{Store: st, Log: logr.Discard()}
	for _, id := range []string{"ing-1", "ing-2"} {
		run(t, w, ingest.Attempt{Tenant: "t1", IngestionID: id, BlobID: blob.ID, Attempt: 1, ReportSHA256: blob.SHA256})
	}
	_, n, err := st.ListFindings(context.Background(), "t1", store.FindingQuery{Page: store.Page{Number: 1, Size: 10}})
	if err != nil || n != 2 {
		t.Fatalf("findings = %d (err %v), want 2", n, err)
	}
	scans, ns, err := st.ListScans(context.Background(), "t1", store.ScanQuery{Page: store.Page{Number: 1, Size: 10}})
	if err != nil || ns != 1 || scans[0].Trigger != "imported" {
		t.Fatalf("scans = %+v (err %v), want one imported scan", scans, err)
	}
}

// batchCounter is a store that asks for small batches and records the size
// of each batch of findings it is given.
type batchCounter struct {
	store.Store
	sizes []int
}

func (b *batchCounter) PreferredBatchSize() int { return 3 }

func (b *batchCounter) WriteBatch(ctx context.Context, tenant, ingestionID string, attempt int, batch store.Batch) error {
	if len(batch.Findings) > 0 {
		b.sizes = append(b.sizes, len(batch.Findings))
	}
	return b.Store.WriteBatch(ctx, tenant, ingestionID, attempt, batch)
}

// A store's preferred batch size applies unless the Worker sets its own.
func TestWorkerUsesTheStoresBatchSize(t *testing.T) {
	var recs []string
	for i := range 7 {
		recs = append(recs, record(fmt.Sprintf("u%d", i), "111111111111"))
	}
	for _, tc := range []struct {
		batchSize int
		want      string
	}{{0, "[3 3 1]"}, {5, "[5 2]"}} {
		st := &batchCounter{Store: newStore(t)}
		blob := put(t, st, report(recs...))
		// One write at a time, so the batches reach the store in order.
		w := &ingest.Worker{Store: st, Log: logr.Discard(), BatchSize: tc.batchSize, MaxInflight: 1}
		if r, _ := run(t, w, ingest.Attempt{Tenant: "t1", IngestionID: "ing", BlobID: blob.ID, Attempt: 1}); r.Processed != 7 {
			t.Fatalf("run = %+v", r)
		}
		if got := fmt.Sprint(st.sizes); got != tc.want {
			t.Errorf("BatchSize %d: batches of %s findings, want %s", tc.batchSize, got, tc.want)
		}
	}
}

// A paced run is still going when it is stopped from outside, as a killed
// manager's is: it leaves the run open with part of the findings written,
// and the next attempt rewrites them to the exact counts.
func TestWorkerPacedRunStoppedThenRetried(t *testing.T) {
	const n = 60
	var recs []string
	for i := range n {
		recs = append(recs, record(fmt.Sprintf("u%d", i), "111111111111"))
	}
	st := newStore(t)
	blob := put(t, st, report(recs...))
	job := ingest.Attempt{Tenant: "t1", IngestionID: "ing", BlobID: blob.ID, Attempt: 1, Total: n}
	// 40 records a second: the run needs 1.5 s, far longer than the wait
	// for its first stored batch below.
	paced := &ingest.Worker{Store: st, Log: logr.Discard(), BatchSize: 5, MaxInflight: 1,
		ProgressInterval: time.Millisecond, RecordsPerSecond: 40}
	ctx, stop := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- paced.Run(ctx, job) }()
	testenv.Eventually(t, 10*time.Second, "the first progress of the paced run", func() (bool, string) {
		r, err := st.GetRun(context.Background(), "t1", "ing")
		if err == nil && r.Processed > 0 {
			return true, ""
		}
		select {
		case err := <-ended:
			stop()
			t.Fatalf("the paced run ended (%v) before any progress was seen: it was not paced", err)
		default:
		}
		return false, fmt.Sprintf("run %+v (err %v)", r, err)
	})
	stop()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run returned %v, want context.Canceled", err)
	}
	if r, _ := st.GetRun(context.Background(), "t1", "ing"); r.Status != store.RunRunning || r.Processed == 0 || r.Processed >= n {
		t.Fatalf("after the stop the run is %+v, want it open with part of the %d records", r, n)
	}

	next := &ingest.Worker{Store: st, Log: logr.Discard()}
	job.Attempt = 2
	r, errs := run(t, next, job)
	if r.Status != store.RunSucceeded || r.Processed != n || r.Invalid != 0 || len(errs) != 0 {
		t.Fatalf("second attempt = %+v, errors %+v; want succeeded, %d processed, 0 invalid", r, errs, n)
	}
	if _, count, err := st.ListFindings(context.Background(), "t1", store.FindingQuery{Page: store.Page{Number: 1, Size: 1}}); err != nil || count != n {
		t.Fatalf("findings = %d (err %v), want exactly %d", count, err, n)
	}
}

// flushCounter is a store whose search index defers entries, as
// PostgreSQL's does, recording the flushes the worker asks for.
type flushCounter struct {
	store.Store
	flushes int
	err     error
}

func (f *flushCounter) FlushSearchIndex(context.Context) error {
	f.flushes++
	return f.err
}

// The search index is flushed after an ingestion that succeeded, and only
// then; a flush that fails leaves the recorded run as it is.
func TestWorkerFlushesTheSearchIndex(t *testing.T) {
	for _, tc := range []struct {
		name        string
		content     string
		flushErr    error
		status      store.RunStatus
		wantFlushes int
	}{
		{"succeeded", report(record("a", "111111111111")), nil, store.RunSucceeded, 1},
		{"failed", report(`{"class_uid":2004}`), nil, store.RunFailed, 0},
		{"succeeded, the flush failing", report(record("a", "111111111111")), errors.New("permission denied"), store.RunSucceeded, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &flushCounter{Store: newStore(t), err: tc.flushErr}
			blob := put(t, st, tc.content)
			w := &ingest.Worker{Store: st, Log: logr.Discard()}
			err := w.Run(context.Background(), ingest.Attempt{Tenant: "t1", IngestionID: "ing", BlobID: blob.ID, Attempt: 1})
			var failed *ingest.FailedError
			if (tc.status == store.RunSucceeded && err != nil) || (tc.status == store.RunFailed && !errors.As(err, &failed)) {
				t.Fatalf("Run = %v, want a run that %s", err, tc.status)
			}
			if r, err := st.GetRun(context.Background(), "t1", "ing"); err != nil || r.Status != tc.status {
				t.Errorf("run = %+v (%v), want %s", r, err, tc.status)
			}
			if st.flushes != tc.wantFlushes {
				t.Errorf("%d flushes, want %d", st.flushes, tc.wantFlushes)
			}
		})
	}
}

// A provider_limit_exceeded row points at the member the account was read
// from and shows it as JSON text, like every other row.
func TestWorkerProviderLimitRow(t *testing.T) {
	const head = `{"class_uid":2004,"activity_id":1,"category_uid":2,"type_uid":200401,"time":1739000000,
"severity_id":3,"metadata":{"version":"1.4.0","product":{"name":"scanner"}},"finding_info":{"uid":"over"},`
	long := strings.Repeat("9", 150)
	for _, tc := range []struct {
		name, account, pointer, value string
	}{
		{"cloud aws", `"cloud":{"provider":"aws","account":{"uid":"222222222222"}}}`, "/cloud/account/uid", `"222222222222"`},
		{"cloud kubernetes", `"cloud":{"provider":"kubernetes","account":{"uid":"ctx"}}}`, "/cloud/account/uid", `"ctx"`},
		{"unmapped aws", `"unmapped":{"provider":"aws","provider_uid":"333333333333"}}`, "/unmapped/provider_uid", `"333333333333"`},
		{"unmapped kubernetes", `"unmapped":{"provider":"kubernetes","provider_uid":"ctx"}}`, "/unmapped/provider_uid", `"ctx"`},
		{"long uid", `"cloud":{"provider":"aws","account":{"uid":"` + long + `"}}}`, "/cloud/account/uid", `"` + long[:98] + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			blob := put(t, st, report(record("a", "111111111111"), head+tc.account))
			w := &ingest.Worker{Store: st, Log: logr.Discard()}
			_, errs := run(t, w, ingest.Attempt{Tenant: "t1", IngestionID: "ing", BlobID: blob.ID, Attempt: 1,
				AllowedAccounts: map[string]bool{"aws/111111111111": true}})
			if len(errs) != 1 || errs[0].Code != ingest.CodeProviderLimit {
				t.Fatalf("errors = %+v, want one %s row", errs, ingest.CodeProviderLimit)
			}
			if e := errs[0]; e.Pointer != tc.pointer || e.Value != tc.value || e.FindingUID != "over" {
				t.Errorf("row = pointer %q value %q uid %q, want %q %q %q", e.Pointer, e.Value, e.FindingUID, tc.pointer, tc.value, "over")
			}
		})
	}
}

// A scan covers one account: a record naming the scan of another account,
// earlier in the report or stored by an earlier ingestion, is refused with
// a row that says whose scan it is, and the scan keeps its account.
func TestWorkerScanCoversOneAccount(t *testing.T) {
	const scanID = "0b1c6a2e-4a57-4e0f-9d6b-0f0e7f9c2a11"
	scanned := func(uid, account string) string {
		return strings.TrimSuffix(record(uid, account), "}") + `,"unmapped":{"scan_id":"` + scanID + `"}}`
	}
	for _, tc := range []struct {
		name    string
		earlier string // a report ingested first, or none
		content string
		invalid int
		record  int    // the refused record's index
		detail  string // of the one error row, if any
	}{
		{"one account", "", report(scanned("a", "111111111111"), scanned("b", "111111111111")), 0, 0, ""},
		{"a second account in the report", "", report(scanned("a", "111111111111"), scanned("b", "222222222222"), scanned("c", "111111111111")), 1, 1,
			"unmapped.scan_id " + scanID + " is the scan of account aws/111111111111 (record 0), and this record is of account aws/222222222222; a scan covers one account"},
		{"a second account after an earlier ingestion", report(scanned("a", "111111111111")), report(scanned("b", "222222222222"), scanned("c", "111111111111")), 1, 0,
			"unmapped.scan_id " + scanID + " is the scan of account aws/111111111111 (a scan stored earlier), and this record is of account aws/222222222222; a scan covers one account"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			w := &ingest.Worker{Store: st, Log: logr.Discard(), BatchSize: 1}
			if tc.earlier != "" {
				blob := put(t, st, tc.earlier)
				if r, _ := run(t, w, ingest.Attempt{Tenant: "t1", IngestionID: "first", BlobID: blob.ID, Attempt: 1}); r.Status != store.RunSucceeded {
					t.Fatalf("earlier ingestion %+v", r)
				}
			}
			blob := put(t, st, tc.content)
			r, errs := run(t, w, ingest.Attempt{Tenant: "t1", IngestionID: "ing", BlobID: blob.ID, Attempt: 1})
			if r.Status != store.RunSucceeded || r.Invalid != tc.invalid {
				t.Errorf("run = %+v, want succeeded with %d invalid", r, tc.invalid)
			}
			if tc.detail == "" && len(errs) != 0 {
				t.Errorf("errors %+v, want none", errs)
			}
			if tc.detail != "" {
				if len(errs) != 1 || errs[0].Code != ingest.CodeScanAccount || errs[0].Detail != tc.detail || errs[0].Pointer != "/unmapped/scan_id" ||
					errs[0].Value != `"`+scanID+`"` || errs[0].FindingUID != "b" || errs[0].RecordIndex == nil || *errs[0].RecordIndex != tc.record {
					t.Errorf("errors %+v, want one %s row for record b: %q", errs, ingest.CodeScanAccount, tc.detail)
				}
			}
			pt, pu, err := st.ScanAccount(context.Background(), "t1", scanID)
			if err != nil || pt != "aws" || pu != "111111111111" {
				t.Errorf("scan account = %s/%s, %v; want aws/111111111111", pt, pu, err)
			}
			if _, _, err := st.ScanAccount(context.Background(), "t2", scanID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("another tenant's scan account: %v, want ErrNotFound", err)
			}
		})
	}
}

// The example report, a scanner's own test data, labels each severity
// with a severity_id of the wrong end of the scale (Critical 1,
// Informational 5). The caption decides: its findings are stored, sorted
// and counted as critical/5 ... informational/1, and each keeps its record
// as sent.
func TestWorkerSeverityCaptionDecides(t *testing.T) {
	ctx := context.Background()
	content, err := os.ReadFile(filepath.Join("..", "..", "examples", "aws_1500_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var records []json.RawMessage
	if err := json.Unmarshal(content, &records); err != nil {
		t.Fatal(err)
	}
	sent := map[string]json.RawMessage{}
	for _, rec := range records {
		var r struct {
			FindingInfo struct{ UID string } `json:"finding_info"`
		}
		if err := json.Unmarshal(rec, &r); err != nil {
			t.Fatal(err)
		}
		sent[r.FindingInfo.UID] = rec
	}
	st := newStore(t)
	blob := put(t, st, string(content))
	w := &ingest.Worker{Store: st, Log: logr.Discard()}
	if r, errs := run(t, w, ingest.Attempt{Tenant: "t1", IngestionID: "ing", BlobID: blob.ID, Attempt: 1}); r.Status != store.RunSucceeded || r.Invalid != 0 {
		t.Fatalf("run = %+v, errors %+v; want every record valid", r, errs)
	}

	first, total, err := st.ListFindings(ctx, "t1", store.FindingQuery{Sort: []string{"-severity_id"}, Page: store.Page{Number: 1, Size: 300}})
	if err != nil || total != 1500 {
		t.Fatalf("ListFindings -severity_id: %d findings, %v", total, err)
	}
	for _, f := range first {
		if f.Severity != "critical" || f.SeverityID != 5 {
			t.Fatalf("most severe first: finding %s is %s/%d, want the 300 critical/5 findings first", f.UID, f.Severity, f.SeverityID)
		}
		if !bytes.Equal(f.Raw, sent[f.UID]) {
			t.Fatalf("finding %s: raw record changed:\n got %s\nwant %s", f.UID, f.Raw, sent[f.UID])
		}
		if !bytes.Contains(f.Raw, []byte(`"severity_id": 1`)) && !bytes.Contains(f.Raw, []byte(`"severity_id":1`)) {
			t.Fatalf("finding %s: raw record %s does not keep the severity_id 1 it was sent with", f.UID, f.Raw)
		}
	}

	pairs, err := st.FindingCounts(ctx, "t1", store.FindingQuery{Severity: []string{"critical"}}, []string{"severity"})
	if err != nil || len(pairs) != 1 || pairs[0].Count != 300 {
		t.Fatalf("count of critical findings: %v, %v; want 300", pairs, err)
	}
	for sev, id := range map[string]int{"critical": 5, "high": 4, "medium": 3, "low": 2, "informational": 1} {
		got, n, err := st.ListFindings(ctx, "t1", store.FindingQuery{Severity: []string{sev}, Sort: []string{"severity_id"}, Page: store.Page{Number: 1, Size: 1}})
		if err != nil || n != 300 || len(got) != 1 || got[0].SeverityID != id {
			ids := make([]int, len(got))
			for i, f := range got {
				ids[i] = f.SeverityID
			}
			t.Errorf("findings of severity %s: %d, first of severity_id %v, %v; want 300 of severity_id %d", sev, n, ids, err, id)
		}
	}
}

// faulty is a real store with one step made to panic, as a bug in the store
// or the parse would: the only way to reach the worker's guard.
type faulty struct {
	store.Store
	in string // "write", "progress", "read" or "finish"
}

func (f *faulty) WriteBatch(ctx context.Context, tenant, ingestionID string, attempt int, batch store.Batch) error {
	if f.in == "write" && len(batch.Findings) > 0 {
		panic("a batch write's fault")
	}
	return f.Store.WriteBatch(ctx, tenant, ingestionID, attempt, batch)
}

func (f *faulty) UpdateRun(ctx context.Context, tenant, ingestionID string, attempt int, p store.Progress) error {
	if f.in == "progress" {
		var m map[string]int
		m["processed"] = p.Processed // assignment to entry in nil map
	}
	return f.Store.UpdateRun(ctx, tenant, ingestionID, attempt, p)
}

func (f *faulty) FinishRun(ctx context.Context, tenant, ingestionID string, attempt int, o store.Outcome) error {
	if f.in == "finish" {
		panic("a fault as the run ends")
	}
	return f.Store.FinishRun(ctx, tenant, ingestionID, attempt, o)
}

func (f *faulty) OpenBlob(ctx context.Context, tenant, id string) (io.ReadCloser, error) {
	rc, err := f.Store.OpenBlob(ctx, tenant, id)
	if err != nil || f.in != "read" {
		return rc, err
	}
	return panicReader{rc}, nil
}

// panicReader hands out the report's first bytes, then panics.
type panicReader struct{ io.ReadCloser }

func (p panicReader) Read(b []byte) (int, error) {
	if len(b) > 200 {
		b = b[:200]
	}
	n, err := p.ReadCloser.Read(b)
	if n == 0 {
		panic("a fault while reading the report")
	}
	return n, err
}

// A fault of the worker's own (a panic in the parse, a batch write or a
// progress report) fails that ingestion with worker_failed, recorded like
// any other outcome, instead of ending the process: with the in-process
// executor that is the manager, every tenant's ingestions, and the same
// fault again at each retry of the report.
func TestWorkerFaultFailsTheIngestion(t *testing.T) {
	var recs []string
	for i := range 9 {
		recs = append(recs, record(fmt.Sprintf("u%d", i), "111111111111"))
	}
	for _, in := range []string{"write", "progress", "read"} {
		t.Run(in, func(t *testing.T) {
			st := &faulty{Store: newStore(t), in: in}
			blob := put(t, st, report(recs...))
			w := &ingest.Worker{Store: st, Log: logr.Discard(), BatchSize: 2, ProgressInterval: time.Nanosecond}
			job := ingest.Attempt{Tenant: "t1", IngestionID: "ing-" + in, BlobID: blob.ID, Attempt: 1}
			err := w.Run(context.Background(), job)
			var failed *ingest.FailedError
			if !errors.As(err, &failed) || !strings.Contains(failed.Message, "internal error at record") {
				t.Fatalf("Run = %v, want the ingestion failed on an internal error", err)
			}
			got, err := st.GetRun(context.Background(), "t1", job.IngestionID)
			if err != nil || got.Status != store.RunFailed || !strings.Contains(got.Message, "its log has the details") {
				t.Errorf("run = %+v (%v), want failed with the message", got, err)
			}
			errs, _, err := st.Store.(store.IngestionErrors).ListIngestionErrors(context.Background(), "t1", job.IngestionID, store.Page{Number: 1, Size: 100})
			if err != nil || len(errs) != 1 || errs[0].Code != ingest.CodeWorkerFailed || errs[0].RecordIndex != nil {
				t.Errorf("errors = %+v (%v), want one ingestion-level %s", errs, err, ingest.CodeWorkerFailed)
			}
		})
	}
}

// What the worker cannot fail itself (the store failing as the run ends)
// stops that run only: the pool goes on, and the run is left open for the
// controller's next attempt.
func TestPoolSurvivesAFault(t *testing.T) {
	st := &faulty{Store: newStore(t), in: "finish"}
	blob := put(t, st, report(record("u1", "111111111111")))
	done := make(chan ingest.Attempt, 1)
	p := ingest.NewPool(&ingest.Worker{Store: st, Log: logr.Discard()}, 1)
	p.OnDone = func(a ingest.Attempt) { done <- a }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Start(ctx) }()
	job := ingest.Attempt{Tenant: "t1", IngestionID: "ing", BlobID: blob.ID, Attempt: 1}
	for {
		err := p.Submit(job)
		if err == nil {
			break
		}
		if !errors.Is(err, ingest.ErrPoolStopped) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the attempt never ended")
	}
	if p.Active(job) {
		t.Error("the attempt is still held after its fault")
	}
	r, err := st.GetRun(context.Background(), "t1", "ing")
	if err != nil || r.Status != store.RunRunning {
		t.Errorf("run = %+v (%v), want it left running for the next attempt", r, err)
	}
}
