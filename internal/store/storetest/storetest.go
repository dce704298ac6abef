// Package storetest is the conformance suite every store.Store engine must
// pass. Engines call Run from their own tests with a function that opens a
// fresh, empty store.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// BlobCounter is implemented by engines so the suite can prove that a failed
// upload left no rows behind (the Store interface cannot see half-written
// blobs, by design).
type BlobCounter interface {
	CountBlobs(ctx context.Context, tenant string) (blobs, chunks int, err error)
}

// Run runs the suite. open must return a new store with no rows, and arrange
// for it to be closed when t ends.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"BlobRoundTrip", testBlobRoundTrip},
		{"BlobEmpty", testBlobEmpty},
		{"BlobTenantIsolation", testBlobTenantIsolation},
		{"BlobPutFailureKeepsNothing", testBlobPutFailure},
		{"BlobPutCancelKeepsNothing", testBlobPutCancel},
		{"BlobSweepIncomplete", testBlobSweepIncomplete},
		{"BlobAccounts", testBlobAccounts},
		{"BlobAccountsFailureKeepsNothing", testBlobAccountsFailure},
		{"RecordBlobAccounts", testRecordBlobAccounts},
		{"RunLifecycle", testRunLifecycle},
		{"RunStaleAttempts", testRunStaleAttempts},
		{"IngestionErrorCodes", testIngestionErrorCodes},
		{"RunRestartSameAttempt", testRunRestartSameAttempt},
		{"RunTenantIsolation", testRunTenantIsolation},
		{"RunInvalidOutcome", testRunInvalidOutcome},
		{"StartRunFencesOldWriter", testStartRunFences},
		{"WriteBatchRoundTrip", testWriteBatchRoundTrip},
		{"WriteBatchIdempotent", testWriteBatchIdempotent},
		{"WriteBatchDuplicatesInBatch", testWriteBatchDuplicates},
		{"WriteBatchStaleWritesNothing", testWriteBatchStale},
		{"WriteBatchValidation", testWriteBatchValidation},
		{"FailedIngestionGivesBackRewrittenFindings", testFailedIngestionAttribution},
		{"IngestionErrors", testIngestionErrors},
		{"ListFindings", testListFindings},
		{"ListFindingsInvalidSort", testListFindingsInvalidSort},
		{"ListFindingsAfterKey", testListFindingsAfterKey},
		{"ListFindingsByNumber", testListFindingsByNumber},
		{"GetFinding", testGetFinding},
		{"ListScans", testListScans},
		{"FindingCounts", testFindingCounts},
		{"SearchSemantics", testSearchSemantics},
		{"Latest", testLatest},
		{"LatestOrders", testLatestOrders},
		{"LatestTiesAcrossScans", testLatestTiesAcrossScans},
		{"ConcurrentReadsAndWrites", testConcurrent},
		{"DeleteRunKeepsFindings", testDeleteRun},
		{"DeleteTenantData", testDeleteTenantData},
		{"EndedSessions", testEndedSessions},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

const (
	tenantA = "tenant-a"
	tenantB = "tenant-b"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func checkUTC(t *testing.T, what string, ts time.Time) {
	t.Helper()
	if ts.Location() != time.UTC {
		t.Errorf("%s: location %v, want UTC", what, ts.Location())
	}
}

// --- blobs ---

// patternReader produces n deterministic pseudo-random bytes without holding
// them, so large blobs cost no test memory either.
func patternReader(seed uint64, n int64) io.Reader {
	return io.LimitReader(&rngReader{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}, n)
}

type rngReader struct{ r *rand.Rand }

func (r *rngReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}

func sha(r io.Reader) (string, int64) {
	h := sha256.New()
	n, _ := io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil)), n
}

func testBlobRoundTrip(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// Three whole 1 MiB chunks and a ragged tail: crosses every boundary.
	const size = 3<<20 + 12345
	wantSum, _ := sha(patternReader(1, size))
	b, err := s.PutBlob(ctx, tenantA, patternReader(1, size))
	must(t, err, "PutBlob")
	if b.ID == "" || b.Size != size || b.SHA256 != wantSum {
		t.Fatalf("PutBlob = %+v, want size %d sha256 %s", b, size, wantSum)
	}
	rc, err := s.OpenBlob(ctx, tenantA, b.ID)
	must(t, err, "OpenBlob")
	// An odd buffer size makes reads straddle chunk boundaries.
	h := sha256.New()
	n, err := io.CopyBuffer(h, struct{ io.Reader }{rc}, make([]byte, 7777))
	must(t, err, "read blob")
	must(t, rc.Close(), "close blob")
	if got := hex.EncodeToString(h.Sum(nil)); n != size || got != wantSum {
		t.Fatalf("read back %d bytes sha256 %s, want %d bytes %s", n, got, size, wantSum)
	}

	// Byte-exact comparison of a prefix, beyond the hash.
	rc, err = s.OpenBlob(ctx, tenantA, b.ID)
	must(t, err, "OpenBlob again")
	got := make([]byte, 1<<20+10)
	_, err = io.ReadFull(rc, got)
	must(t, err, "read prefix")
	rc.Close()
	want := make([]byte, len(got))
	io.ReadFull(patternReader(1, size), want)
	if !bytes.Equal(got, want) {
		t.Fatal("blob prefix differs from what was written")
	}

	b2, err := s.PutBlob(ctx, tenantA, strings.NewReader("second"))
	must(t, err, "PutBlob second")
	if b2.ID == b.ID {
		t.Fatalf("two blobs share id %s", b.ID)
	}
}

func testBlobEmpty(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	b, err := s.PutBlob(ctx, tenantA, strings.NewReader(""))
	must(t, err, "PutBlob")
	const emptySum = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if b.Size != 0 || b.SHA256 != emptySum {
		t.Fatalf("PutBlob(empty) = %+v", b)
	}
	rc, err := s.OpenBlob(ctx, tenantA, b.ID)
	must(t, err, "OpenBlob")
	data, err := io.ReadAll(rc)
	must(t, err, "read")
	rc.Close()
	if len(data) != 0 {
		t.Fatalf("read %d bytes from empty blob", len(data))
	}
}

func testBlobTenantIsolation(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	b, err := s.PutBlob(ctx, tenantA, strings.NewReader("secret report"))
	must(t, err, "PutBlob")
	_, err = s.OpenBlob(ctx, tenantB, b.ID)
	wantErr(t, err, store.ErrNotFound, "OpenBlob by other tenant")
	wantErr(t, s.DeleteBlob(ctx, tenantB, b.ID), store.ErrNotFound, "DeleteBlob by other tenant")
	_, err = s.OpenBlob(ctx, tenantA, "00000000-0000-0000-0000-000000000000")
	wantErr(t, err, store.ErrNotFound, "OpenBlob unknown id")
	_, err = s.OpenBlob(ctx, tenantA, "not-a-uuid")
	wantErr(t, err, store.ErrNotFound, "OpenBlob malformed id")

	rc, err := s.OpenBlob(ctx, tenantA, b.ID)
	must(t, err, "OpenBlob by owner after other tenant's delete")
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "secret report" {
		t.Fatalf("read %q", data)
	}

	must(t, s.DeleteBlob(ctx, tenantA, b.ID), "DeleteBlob")
	_, err = s.OpenBlob(ctx, tenantA, b.ID)
	wantErr(t, err, store.ErrNotFound, "OpenBlob after delete")
	wantErr(t, s.DeleteBlob(ctx, tenantA, b.ID), store.ErrNotFound, "DeleteBlob twice")
	expectNoBlobs(t, s, tenantA)
}

func expectNoBlobs(t *testing.T, s store.Store, tenant string) {
	t.Helper()
	c, ok := s.(BlobCounter)
	if !ok {
		t.Fatalf("%T does not implement storetest.BlobCounter", s)
	}
	blobs, chunks, err := c.CountBlobs(context.Background(), tenant)
	must(t, err, "CountBlobs")
	if blobs != 0 || chunks != 0 {
		t.Fatalf("%d blob rows and %d chunk rows left, want none", blobs, chunks)
	}
}

// failingReader yields n good bytes, then err.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func testBlobPutFailure(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	boom := errors.New("client went away")
	// Fail after more than two chunks have been written.
	_, err := s.PutBlob(ctx, tenantA, &failingReader{r: patternReader(2, 2<<20+500), err: boom})
	wantErr(t, err, boom, "PutBlob with failing reader")
	expectNoBlobs(t, s, tenantA)
	// A source failing with io.ErrUnexpectedEOF (a truncated multipart part
	// does) is a failure too, not a short last chunk.
	_, err = s.PutBlob(ctx, tenantA, &failingReader{r: patternReader(4, 1<<20+7), err: io.ErrUnexpectedEOF})
	wantErr(t, err, io.ErrUnexpectedEOF, "PutBlob with a reader failing with io.ErrUnexpectedEOF")
	expectNoBlobs(t, s, tenantA)
}

// cancelReader cancels the upload's context after n bytes, as a client
// disconnect does, and keeps producing data.
type cancelReader struct {
	r      io.Reader
	left   int64
	cancel func()
}

func (c *cancelReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left <= 0 {
		c.cancel()
	}
	return n, err
}

func testBlobPutCancel(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(ctxT(t))
	_, err := s.PutBlob(ctx, tenantA, &cancelReader{r: patternReader(3, 4<<20), left: 1<<20 + 300, cancel: cancel})
	if err == nil {
		t.Fatal("PutBlob succeeded although its context was cancelled")
	}
	expectNoBlobs(t, s, tenantA)
}

// stallingReader yields n bytes, then reports on stalled and blocks until
// resume is closed, when it ends the stream: an upload whose client stopped
// sending in the middle.
type stallingReader struct {
	r       io.Reader
	stalled chan struct{}
	resume  chan struct{}
	once    sync.Once
}

func (s *stallingReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err == io.EOF {
		s.once.Do(func() { close(s.stalled) })
		<-s.resume
	}
	return n, err
}

func testBlobSweepIncomplete(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	j, ok := s.(store.Janitor)
	if !ok {
		t.Fatalf("%T does not implement store.Janitor", s)
	}
	c, ok := s.(BlobCounter)
	if !ok {
		t.Fatalf("%T does not implement storetest.BlobCounter", s)
	}
	counts := func(what string, wantBlobs, wantChunks int) {
		t.Helper()
		blobs, chunks, err := c.CountBlobs(ctx, tenantA)
		must(t, err, "CountBlobs")
		if blobs != wantBlobs || chunks != wantChunks {
			t.Fatalf("%s: %d blobs and %d chunks, want %d and %d", what, blobs, chunks, wantBlobs, wantChunks)
		}
	}
	done, err := s.PutBlob(ctx, tenantA, strings.NewReader("a complete report"))
	must(t, err, "PutBlob complete")

	// Two whole chunks are stored when the client stalls.
	stalling := &stallingReader{r: patternReader(5, 2<<20), stalled: make(chan struct{}), resume: make(chan struct{})}
	putErr := make(chan error, 1)
	go func() {
		_, err := s.PutBlob(ctx, tenantA, stalling)
		putErr <- err
	}()
	select {
	case <-stalling.stalled:
	case err := <-putErr:
		t.Fatalf("PutBlob returned %v before its reader stalled", err)
	}
	counts("while the upload stalls", 2, 3)

	n, err := j.SweepIncompleteBlobs(ctx, time.Now().Add(-time.Hour))
	must(t, err, "SweepIncompleteBlobs with an old cutoff")
	if n != 0 {
		t.Fatalf("a sweep of uploads idle for an hour removed %d, want 0 (the stalled one is seconds old)", n)
	}
	counts("after a sweep that must keep everything", 2, 3)

	n, err = j.SweepIncompleteBlobs(ctx, time.Now().Add(time.Second))
	must(t, err, "SweepIncompleteBlobs")
	if n != 1 {
		t.Fatalf("sweep removed %d uploads, want the 1 stalled one", n)
	}
	counts("after the sweep", 1, 1)

	// The swept upload resumes and ends: it must fail, not complete a blob
	// that has lost its chunks.
	close(stalling.resume)
	if err := <-putErr; err == nil {
		t.Fatal("PutBlob of a swept upload succeeded")
	}
	counts("after the swept upload ended", 1, 1)

	rc, err := s.OpenBlob(ctx, tenantA, done.ID)
	must(t, err, "OpenBlob of the complete blob after sweeps")
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "a complete report" {
		t.Fatalf("complete blob reads %q after sweeps", data)
	}
	n, err = j.SweepIncompleteBlobs(ctx, time.Now().Add(time.Hour))
	must(t, err, "SweepIncompleteBlobs again")
	if n != 0 {
		t.Fatalf("second sweep removed %d, want 0: complete blobs are never swept", n)
	}
}

// --- runs ---

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

// --- findings ---

var baseTime = time.Date(2025, 3, 14, 9, 26, 53, 589793000, time.UTC)

func finding(scan, uid string) store.Finding {
	return store.Finding{
		UID: uid, ScanID: scan, CheckID: "check_" + uid, Title: "Title of " + uid,
		Severity: "high", SeverityID: 4, StatusCode: "FAIL", Status: "New",
		Region: "eu-west-1", ProviderType: "aws", ProviderUID: "123456789012",
		ResourceUID: "arn:aws:s3:::" + uid, Time: baseTime,
		Raw: []byte(`{"finding_info":{"uid":"` + uid + `"}}`),
	}
}

func batchOf(fs ...store.Finding) store.Batch { return store.Batch{Findings: fs} }

// normalised is what the store is expected to return for f written by
// ingestion ing of tenant.
func normalised(tenant, ing string, f store.Finding) store.Finding {
	f.ID = store.FindingID(tenant, f.ScanID, f.UID)
	f.IngestionID = ing
	f.Severity = strings.ToLower(f.Severity)
	f.StatusCode = strings.ToUpper(f.StatusCode)
	f.ProviderType = strings.ToLower(f.ProviderType)
	f.Time = f.Time.UTC().Truncate(time.Microsecond)
	f.InsertedAt, f.UpdatedAt = time.Time{}, time.Time{}
	return f
}

func sameFinding(t *testing.T, what string, got, want store.Finding) {
	t.Helper()
	checkUTC(t, what+" Time", got.Time)
	checkUTC(t, what+" InsertedAt", got.InsertedAt)
	checkUTC(t, what+" UpdatedAt", got.UpdatedAt)
	if got.InsertedAt.IsZero() || got.UpdatedAt.Before(got.InsertedAt) {
		t.Errorf("%s: inserted_at %v updated_at %v", what, got.InsertedAt, got.UpdatedAt)
	}
	g := got
	g.InsertedAt, g.UpdatedAt = time.Time{}, time.Time{}
	if !g.Time.Equal(want.Time) {
		t.Errorf("%s: Time %v, want %v", what, g.Time, want.Time)
	}
	g.Time = want.Time
	if !reflect.DeepEqual(g, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, g, want)
	}
}

func expectFindings(t *testing.T, s store.Store, tenant string, q store.FindingQuery, want int) []store.Finding {
	t.Helper()
	q.Page.Size = 1000
	fs, n, err := s.ListFindings(context.Background(), tenant, q)
	must(t, err, "ListFindings")
	if n != want || len(fs) != want {
		t.Fatalf("ListFindings(%+v): %d rows, total %d, want %d", q, len(fs), n, want)
	}
	return fs
}

func testWriteBatchRoundTrip(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 2), "StartRun")
	f := store.Finding{
		UID: "prowler-aws-iam_root_mfa-123456789012-us-east-1-root", ScanID: "scan-1",
		CheckID: "iam_root_mfa_enabled", Title: "Ensure MFA is enabled for the root account",
		Severity: "Critical", SeverityID: 5, StatusCode: "fail", Status: "New", Region: "us-east-1",
		ProviderType: "AWS", ProviderUID: "123456789012", ResourceUID: "arn:aws:iam::123456789012:root",
		// Nanoseconds and a non-UTC zone: the store keeps microseconds, in UTC.
		Time: time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.FixedZone("CET", 3600)),
		// Odd spacing, key order, escapes and a trailing newline must survive.
		Raw: []byte("{ \"class_uid\":2004,\n\t\"z\":1, \"a\" : \"\\u00e9t\\u00e9 \u00e9\", \"n\":1.50e+3 }\n"),
		// Callers' values for these are ignored.
		ID: "caller-chosen", IngestionID: "someone-else",
		InsertedAt: time.Unix(1, 0), UpdatedAt: time.Unix(2, 0),
	}
	k := store.Finding{UID: "k8s-1", ScanID: "scan-2", Severity: "low", SeverityID: 2, StatusCode: "PASS",
		ProviderType: "kubernetes", ProviderUID: "cluster-1", Time: baseTime, Raw: []byte(`[]`)}
	// Before PostgreSQL's epoch (2000-01-01), which binary COPY counts from.
	old := store.Finding{UID: "y2k", ScanID: "scan-2", SeverityID: 1, Time: time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC), Raw: []byte(`{}`)}
	before := time.Now().Add(-time.Second)
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{
		Findings: []store.Finding{f, k, old},
		Scans: []store.Scan{
			{ID: "scan-1", ProviderType: "aws", ProviderUID: "123456789012", Trigger: "imported"},
			{ID: "scan-2", ProviderType: "kubernetes", ProviderUID: "cluster-1", Trigger: "imported"},
		},
	}), "WriteBatch")

	wantID := store.FindingID(tenantA, "scan-1", f.UID)
	if wantID == store.FindingID(tenantB, "scan-1", f.UID) || wantID == store.FindingID(tenantA, "scan-2", f.UID) {
		t.Fatal("FindingID ignores tenant or scan")
	}
	got, err := s.GetFinding(ctx, tenantA, wantID)
	must(t, err, "GetFinding")
	sameFinding(t, "GetFinding", got, normalised(tenantA, "ing-1", f))
	if got.InsertedAt.Before(before) || got.InsertedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("InsertedAt %v is not now", got.InsertedAt)
	}
	if !bytes.Equal(got.Raw, f.Raw) {
		t.Errorf("raw changed:\n got %q\nwant %q", got.Raw, f.Raw)
	}
	if got.Severity != "critical" || got.StatusCode != "FAIL" || got.ProviderType != "aws" {
		t.Errorf("indexed columns not normalised: %q %q %q", got.Severity, got.StatusCode, got.ProviderType)
	}
	got2, err := s.GetFinding(ctx, tenantA, store.FindingID(tenantA, "scan-2", "k8s-1"))
	must(t, err, "GetFinding k8s")
	sameFinding(t, "GetFinding k8s", got2, normalised(tenantA, "ing-1", k))
	got3, err := s.GetFinding(ctx, tenantA, store.FindingID(tenantA, "scan-2", "y2k"))
	must(t, err, "GetFinding y2k")
	sameFinding(t, "GetFinding y2k", got3, normalised(tenantA, "ing-1", old))

	fs := expectFindings(t, s, tenantA, store.FindingQuery{}, 3)
	sameFinding(t, "ListFindings[0]", fs[0], normalised(tenantA, "ing-1", f))
}

func testWriteBatchIdempotent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	var fs []store.Finding
	for i := range 30 {
		fs = append(fs, finding("scan-1", fmt.Sprintf("u%02d", i)))
	}
	b := store.Batch{Findings: fs, Scans: []store.Scan{{ID: "scan-1", ProviderType: "aws", ProviderUID: "123456789012", Trigger: "imported"}}}
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 30), "StartRun")
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, b), "WriteBatch")
	first := expectFindings(t, s, tenantA, store.FindingQuery{}, 30)
	scans1, _, err := s.ListScans(ctx, tenantA, store.ScanQuery{})
	must(t, err, "ListScans")

	// The same attempt writing again (a retried batch) and a new ingestion of
	// the same file both converge on the same rows.
	time.Sleep(2 * time.Millisecond)
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, b), "WriteBatch again")
	expectFindings(t, s, tenantA, store.FindingQuery{}, 30)

	time.Sleep(2 * time.Millisecond)
	must(t, s.StartRun(ctx, tenantA, "ing-2", 1, 30), "StartRun ing-2")
	changed := slices.Clone(fs)
	changed[0].Title = "changed title"
	changed[0].Raw = []byte(`{"changed":true}`)
	changed[0].SeverityID, changed[0].Severity = 1, "informational"
	b2 := b
	b2.Findings = changed
	b2.Scans = []store.Scan{{ID: "scan-1", ProviderType: "aws", ProviderUID: "123456789012", Trigger: "scheduled"}}
	must(t, s.WriteBatch(ctx, tenantA, "ing-2", 1, b2), "WriteBatch ing-2")
	second := expectFindings(t, s, tenantA, store.FindingQuery{Sort: []string{"uid"}}, 30)
	byID := map[string]store.Finding{}
	for _, f := range first {
		byID[f.ID] = f
	}
	for i, f := range second {
		old, ok := byID[f.ID]
		if !ok {
			t.Fatalf("finding %s got a new id on re-ingestion", f.UID)
		}
		if !f.InsertedAt.Equal(old.InsertedAt) {
			t.Errorf("%s: inserted_at %v -> %v", f.UID, old.InsertedAt, f.InsertedAt)
		}
		if !f.UpdatedAt.After(old.UpdatedAt) {
			t.Errorf("%s: updated_at not advanced: %v -> %v", f.UID, old.UpdatedAt, f.UpdatedAt)
		}
		sameFinding(t, f.UID, f, normalised(tenantA, "ing-2", changed[i]))
	}
	if n := len(expectFindings(t, s, tenantA, store.FindingQuery{IngestionID: "ing-1"}, 0)); n != 0 {
		t.Fatal("rows still attributed to ing-1")
	}

	scans2, total, err := s.ListScans(ctx, tenantA, store.ScanQuery{})
	must(t, err, "ListScans")
	if total != 1 || len(scans2) != 1 {
		t.Fatalf("ListScans: %d rows total %d, want 1", len(scans2), total)
	}
	sc := scans2[0]
	if sc.ID != "scan-1" || sc.Trigger != "scheduled" || sc.IngestionID != "ing-2" || sc.FindingCount != 30 ||
		!sc.InsertedAt.Equal(scans1[0].InsertedAt) || !sc.UpdatedAt.After(scans1[0].UpdatedAt) {
		t.Fatalf("scan after upsert: %+v (before: %+v)", sc, scans1[0])
	}

	// A batch that is partly new and partly stored (a re-upload of a report
	// that grew) keeps the new rows and updates the others, whatever the
	// order of the two kinds in the batch.
	must(t, s.StartRun(ctx, tenantA, "ing-3", 1, 40), "StartRun ing-3")
	var mixed []store.Finding
	for i := range 10 {
		before, after := finding("scan-1", fmt.Sprintf("a%02d", i)), finding("scan-1", fmt.Sprintf("z%02d", i))
		stored := fs[10+i]
		stored.Title = "updated by ing-3"
		mixed = append(mixed, before, stored, after)
	}
	must(t, s.WriteBatch(ctx, tenantA, "ing-3", 1, store.Batch{Findings: mixed}), "WriteBatch ing-3")
	expectFindings(t, s, tenantA, store.FindingQuery{}, 50)
	updated := 0
	for _, f := range expectFindings(t, s, tenantA, store.FindingQuery{IngestionID: "ing-3"}, 30) {
		if f.Title == "updated by ing-3" {
			updated++
		}
	}
	if updated != 10 {
		t.Fatalf("%d of the 10 stored rows of a mixed batch were updated", updated)
	}
}

func testWriteBatchDuplicates(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 3), "StartRun")
	a1 := finding("scan-1", "dup")
	a2 := finding("scan-1", "dup")
	a2.Title = "last wins"
	other := finding("scan-2", "dup") // same uid, other scan: a different finding
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{
		Findings: []store.Finding{a1, other, a2},
		Scans:    []store.Scan{{ID: "scan-1", Trigger: "a"}, {ID: "scan-1", Trigger: "b"}},
	}), "WriteBatch with duplicates")
	expectFindings(t, s, tenantA, store.FindingQuery{}, 2)
	got, err := s.GetFinding(ctx, tenantA, store.FindingID(tenantA, "scan-1", "dup"))
	must(t, err, "GetFinding")
	if got.Title != "last wins" {
		t.Fatalf("title %q, want the last duplicate's", got.Title)
	}
	scans, _, err := s.ListScans(ctx, tenantA, store.ScanQuery{})
	must(t, err, "ListScans")
	if len(scans) != 1 || scans[0].Trigger != "b" {
		t.Fatalf("scans %+v", scans)
	}
}

func testWriteBatchStale(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	wantErr(t, s.WriteBatch(ctx, tenantA, "nope", 1, batchOf(finding("scan-1", "u"))), store.ErrNotFound, "WriteBatch without run")
	must(t, s.StartRun(ctx, tenantA, "ing-1", 2, 3), "StartRun")
	wantErr(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{
		Findings: []store.Finding{finding("scan-1", "u")},
		Scans:    []store.Scan{{ID: "scan-1"}},
		Errors:   []store.IngestionError{{Code: "x"}},
	}), store.ErrStaleAttempt, "WriteBatch older attempt")
	wantErr(t, s.WriteBatch(ctx, tenantA, "ing-1", 3, batchOf(finding("scan-1", "u"))), store.ErrStaleAttempt, "WriteBatch newer attempt")
	expectFindings(t, s, tenantA, store.FindingQuery{}, 0)
	scans, n, err := s.ListScans(ctx, tenantA, store.ScanQuery{})
	must(t, err, "ListScans")
	if n != 0 || len(scans) != 0 {
		t.Fatalf("stale batch wrote scans: %+v", scans)
	}
	_, n, err = s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{})
	must(t, err, "ListIngestionErrors")
	if n != 0 {
		t.Fatalf("stale batch wrote %d error rows", n)
	}
}

func testWriteBatchValidation(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 3), "StartRun")
	bad := []store.Batch{
		batchOf(finding("scan-1", "ok"), finding("scan-1", "")),
		batchOf(finding("", "no-scan")),
		{Scans: []store.Scan{{ID: ""}}},
		{Errors: []store.IngestionError{{Code: ""}}},
	}
	for i, b := range bad {
		wantErr(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, b), store.ErrInvalidArgument, fmt.Sprintf("bad batch %d", i))
	}
	expectFindings(t, s, tenantA, store.FindingQuery{}, 0)
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{}), "empty batch")
}

// testFailedIngestionAttribution is what filter[ingestion] promises: a
// finding belongs to the last ingestion that wrote it and did not fail.
// Ingestion A stores 3,000 findings and completes; B rewrites them and adds
// 3,000 of its own over three attempts (two lost, as when a worker is killed)
// and fails. A keeps its 3,000, B has only the 3,000 it was first to write.
func testFailedIngestionAttribution(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const n, per = 3000, 500
	old := make([]store.Finding, n)
	fresh := make([]store.Finding, n)
	for i := range n {
		old[i] = finding("scan-1", fmt.Sprintf("old-%04d", i))
		fresh[i] = finding("scan-1", fmt.Sprintf("new-%04d", i))
	}
	write := func(ing string, attempt int, fs []store.Finding) {
		t.Helper()
		for i := 0; i < len(fs); i += per {
			must(t, s.WriteBatch(ctx, tenantA, ing, attempt, batchOf(fs[i:min(i+per, len(fs))]...)), fmt.Sprintf("WriteBatch %s attempt %d", ing, attempt))
		}
	}
	must(t, s.StartRun(ctx, tenantA, "ing-a", 1, n), "StartRun A")
	write("ing-a", 1, old)
	must(t, s.FinishRun(ctx, tenantA, "ing-a", 1, store.Outcome{Status: store.RunSucceeded, Progress: store.Progress{Processed: n}}), "FinishRun A")
	allFindings(t, s, tenantA, "ing-a", n)

	// B's batches mix stored and new findings in both orders, so both the
	// plain insert and the upsert paths of an engine carry its writes.
	var mixed []store.Finding
	for i := 0; i < n; i += per {
		if i/per%2 == 0 {
			mixed = append(mixed, old[i:i+per]...)
			mixed = append(mixed, fresh[i:i+per]...)
		} else {
			mixed = append(mixed, fresh[i:i+per]...)
			mixed = append(mixed, old[i:i+per]...)
		}
	}
	for attempt := 1; attempt <= 3; attempt++ {
		must(t, s.StartRun(ctx, tenantA, "ing-b", attempt, 2*n), fmt.Sprintf("StartRun B attempt %d", attempt))
		// A lost attempt gets part of the way; the last gets through.
		upto := len(mixed) * attempt / 3
		write("ing-b", attempt, mixed[:upto])
	}
	// While B runs, what it has written so far is its.
	allFindings(t, s, tenantA, "ing-b", 2*n)
	allFindings(t, s, tenantA, "ing-a", 0)
	must(t, s.FinishRun(ctx, tenantA, "ing-b", 3, store.Outcome{Status: store.RunFailed, Message: "the worker stopped without a result 3 times"}), "FinishRun B failed")

	for _, f := range allFindings(t, s, tenantA, "ing-a", n) {
		if !strings.HasPrefix(f.UID, "old-") {
			t.Fatalf("finding %s attributed to ing-a, which never wrote it", f.UID)
		}
	}
	for _, f := range allFindings(t, s, tenantA, "ing-b", n) {
		if !strings.HasPrefix(f.UID, "new-") {
			t.Fatalf("finding %s attributed to the failed ing-b, which only rewrote it", f.UID)
		}
	}
	allFindings(t, s, tenantA, "", 2*n)

	// A later ingestion that completes takes over what it rewrites, and a
	// failure after it gives the findings back to it, not to A.
	must(t, s.StartRun(ctx, tenantA, "ing-c", 1, 10), "StartRun C")
	write("ing-c", 1, old[:10])
	must(t, s.FinishRun(ctx, tenantA, "ing-c", 1, store.Outcome{Status: store.RunSucceeded, Progress: store.Progress{Processed: 10}}), "FinishRun C")
	must(t, s.StartRun(ctx, tenantA, "ing-d", 1, 20), "StartRun D")
	write("ing-d", 1, old[:20])
	must(t, s.FinishRun(ctx, tenantA, "ing-d", 1, store.Outcome{Status: store.RunFailed, Message: "boom"}), "FinishRun D failed")
	expectFindings(t, s, tenantA, store.FindingQuery{IngestionID: "ing-c"}, 10)
	allFindings(t, s, tenantA, "ing-a", n-10)
	expectFindings(t, s, tenantA, store.FindingQuery{IngestionID: "ing-d"}, 0)

	// Another tenant's failure touches nothing of tenant A's.
	must(t, s.StartRun(ctx, tenantB, "ing-a", 1, 1), "StartRun other tenant")
	must(t, s.WriteBatch(ctx, tenantB, "ing-a", 1, batchOf(old[0])), "WriteBatch other tenant")
	must(t, s.FinishRun(ctx, tenantB, "ing-a", 1, store.Outcome{Status: store.RunFailed, Message: "boom"}), "FinishRun other tenant")
	expectFindings(t, s, tenantA, store.FindingQuery{IngestionID: "ing-c"}, 10)
}

// allFindings pages through the tenant's findings of one ingestion (all of
// them for ""), checking the total on every page.
func allFindings(t *testing.T, s store.Store, tenant, ingestion string, want int) []store.Finding {
	t.Helper()
	var out []store.Finding
	for page := 1; ; page++ {
		q := store.FindingQuery{IngestionID: ingestion, Sort: []string{"uid"}, Page: store.Page{Number: page, Size: 1000}}
		fs, total, err := s.ListFindings(context.Background(), tenant, q)
		must(t, err, "ListFindings")
		if total != want {
			t.Fatalf("findings of ingestion %q: total %d, want %d", ingestion, total, want)
		}
		out = append(out, fs...)
		if len(fs) < q.Page.Size {
			break
		}
	}
	if len(out) != want {
		t.Fatalf("findings of ingestion %q: %d rows over all pages, want %d", ingestion, len(out), want)
	}
	return out
}

func testIngestionErrors(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 100), "StartRun")
	must(t, s.StartRun(ctx, tenantA, "ing-2", 1, 100), "StartRun ing-2")
	ptr := func(i int) *int { return &i }
	// Written out of order across batches; listed job-level first, then by
	// record index, then in insertion order.
	b1 := []store.IngestionError{
		{RecordIndex: ptr(7), FindingUID: "u7", Code: "missing_field", Detail: "time is required", Pointer: "/time", Value: ""},
		{RecordIndex: ptr(2), FindingUID: "u2", Code: "invalid_type", Detail: "severity_id must be an integer", Pointer: "/severity_id", Value: `"high"`},
		{RecordIndex: ptr(7), FindingUID: "u7", Code: "missing_account", Detail: "no account", Pointer: "/cloud"},
	}
	b2 := []store.IngestionError{
		{RecordIndex: ptr(0), Code: "unsupported_class", Pointer: "/class_uid", Value: "3001"},
		{Code: "job_failed", Detail: "no Detection Finding records"},
	}
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{Errors: b1}), "WriteBatch b1")
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{Errors: b2}), "WriteBatch b2")
	must(t, s.WriteBatch(ctx, tenantA, "ing-2", 1, store.Batch{Errors: []store.IngestionError{{Code: "other"}}}), "WriteBatch ing-2")

	want := []store.IngestionError{b2[1], b2[0], b1[1], b1[0], b1[2]}
	all, total, err := s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{Size: 100})
	must(t, err, "ListIngestionErrors")
	if total != 5 || len(all) != 5 {
		t.Fatalf("got %d rows total %d, want 5", len(all), total)
	}
	for i := range all {
		if all[i].ID <= 0 {
			t.Errorf("row %d: no id assigned", i)
		}
		g := all[i]
		g.ID = 0
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, g, want[i])
		}
	}
	if all[3].ID >= all[4].ID {
		t.Errorf("same record index not in insertion order: ids %d, %d", all[3].ID, all[4].ID)
	}

	// Pages partition the list.
	var paged []store.IngestionError
	for p := 1; p <= 3; p++ {
		rows, n, err := s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{Number: p, Size: 2})
		must(t, err, "ListIngestionErrors page")
		if n != 5 {
			t.Fatalf("page %d: total %d", p, n)
		}
		paged = append(paged, rows...)
	}
	if !reflect.DeepEqual(paged, all) {
		t.Fatalf("pages do not partition the list:\n%+v\n%+v", paged, all)
	}
	rows, n, err := s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{Number: 9, Size: 2})
	must(t, err, "ListIngestionErrors past the end")
	if len(rows) != 0 || n != 5 {
		t.Fatalf("past the end: %d rows total %d", len(rows), n)
	}
	rows, _, err = s.ListIngestionErrors(ctx, tenantA, "ing-1", store.Page{})
	must(t, err, "ListIngestionErrors default page")
	if len(rows) != 5 {
		t.Fatalf("default page: %d rows", len(rows))
	}

	rows, n, err = s.ListIngestionErrors(ctx, tenantB, "ing-1", store.Page{})
	must(t, err, "ListIngestionErrors other tenant")
	if len(rows) != 0 || n != 0 {
		t.Fatalf("other tenant sees %d error rows", n)
	}
	if _, n, _ := s.ListIngestionErrors(ctx, tenantA, "ing-2", store.Page{}); n != 1 {
		t.Fatalf("ing-2 has %d error rows, want 1", n)
	}
}

// fixture writes a varied set of findings for tenantA (and a few for
// tenantB, which must never show up) and returns what the store should hold
// for tenantA.
func fixture(t *testing.T, s store.Store) []store.Finding {
	t.Helper()
	ctx := ctxT(t)
	checks := []string{"iam_root_mfa_enabled", "s3_bucket_public_access", "ec2_sg_open_22", "rbac_cluster_admin"}
	sevs := []string{"informational", "Low", "medium", "HIGH", "critical"}
	codes := []string{"PASS", "fail", "Manual"}
	regions := []string{"eu-west-1", "us-east-1", ""}
	var all []store.Finding
	for i := range 25 {
		f := store.Finding{
			UID:          fmt.Sprintf("uid-%02d", i),
			ScanID:       []string{"scan-1", "scan-2"}[i%2],
			CheckID:      checks[i%4],
			Title:        fmt.Sprintf("Finding number %d", i),
			Severity:     sevs[i%5],
			SeverityID:   i%5 + 1,
			StatusCode:   codes[i%3],
			Status:       "New",
			Region:       regions[i%3],
			ProviderType: []string{"aws", "GCP"}[i%2],
			ProviderUID:  []string{"111111111111", "project-x"}[i%2],
			ResourceUID:  fmt.Sprintf("res/%02d/bucket", i),
			Time:         baseTime.Add(time.Duration(i%7) * time.Hour),
			Raw:          fmt.Appendf(nil, `{"i":%d}`, i),
		}
		switch i {
		case 3:
			f.UID = "UID-03" // upper case sorts before lower case (byte order)
		case 11:
			f.Title = "Covers 100% of_buckets"
		case 17:
			f.ResourceUID = "arn:aws:s3:::Special-Bucket"
		}
		all = append(all, f)
	}
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 15), "StartRun ing-1")
	must(t, s.StartRun(ctx, tenantA, "ing-2", 1, 10), "StartRun ing-2")
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, batchOf(all[:15]...)), "WriteBatch ing-1")
	// Distinct inserted_at values for the inserted_at sort.
	time.Sleep(3 * time.Millisecond)
	must(t, s.WriteBatch(ctx, tenantA, "ing-2", 1, batchOf(all[15:]...)), "WriteBatch ing-2")

	must(t, s.StartRun(ctx, tenantB, "ing-1", 1, 3), "StartRun tenant B")
	must(t, s.WriteBatch(ctx, tenantB, "ing-1", 1, batchOf(all[0], all[5], all[11])), "WriteBatch tenant B")

	out := make([]store.Finding, len(all))
	for i, f := range all {
		ing := "ing-1"
		if i >= 15 {
			ing = "ing-2"
		}
		out[i] = normalised(tenantA, ing, f)
	}
	return out
}

// reference answers q over fs the way the store must.
func reference(fs []store.Finding, inserted map[string]time.Time, q store.FindingQuery) []store.Finding {
	in := func(v string, list []string, norm func(string) string) bool {
		if len(list) == 0 {
			return true
		}
		for _, x := range list {
			if norm(x) == v {
				return true
			}
		}
		return false
	}
	eq := func(v, want string) bool { return want == "" || v == want }
	var out []store.Finding
	for _, f := range fs {
		if !in(f.Severity, q.Severity, strings.ToLower) || !in(f.StatusCode, q.StatusCode, strings.ToUpper) ||
			!in(f.ProviderType, q.ProviderType, strings.ToLower) || !eq(f.ProviderUID, q.ProviderUID) ||
			!eq(f.CheckID, q.CheckID) || !eq(f.Region, q.Region) || !eq(f.ScanID, q.ScanID) ||
			!eq(f.IngestionID, q.IngestionID) {
			continue
		}
		if q.Search != "" {
			s := strings.ToLower(q.Search)
			hit := false
			for _, v := range []string{f.UID, f.Title, f.CheckID, f.ResourceUID} {
				hit = hit || strings.Contains(strings.ToLower(v), s)
			}
			if !hit {
				continue
			}
		}
		out = append(out, f)
	}
	keys := q.Sort
	if len(keys) == 0 {
		keys = []string{"-severity_id"}
	}
	// Ties are broken in the direction of the first key: by insertion
	// time when it is a check or a severity, then by uid, then by id.
	dir := ""
	if strings.HasPrefix(keys[0], "-") {
		dir = "-"
	}
	keys = slices.Clone(keys)
	if first := strings.TrimPrefix(keys[0], "-"); first == "check_id" || first == "severity_id" {
		keys = append(keys, dir+"inserted_at")
	}
	keys = append(keys, dir+"uid", dir+"id")
	slices.SortStableFunc(out, func(a, b store.Finding) int {
		for _, k := range keys {
			desc := strings.HasPrefix(k, "-")
			var c int
			switch strings.TrimPrefix(k, "-") {
			case "time":
				c = a.Time.Compare(b.Time)
			case "severity_id":
				c = a.SeverityID - b.SeverityID
			case "inserted_at":
				c = inserted[a.ID].Compare(inserted[b.ID])
			case "check_id":
				c = strings.Compare(a.CheckID, b.CheckID)
			case "uid":
				c = strings.Compare(a.UID, b.UID)
			case "id":
				c = strings.Compare(a.ID, b.ID)
			}
			if desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	return out
}

func uids(fs []store.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.UID
	}
	return out
}

func testListFindings(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	fs := fixture(t, s)
	inserted := map[string]time.Time{}
	stored, _, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Page: store.Page{Size: 100}})
	must(t, err, "ListFindings")
	for _, f := range stored {
		inserted[f.ID] = f.InsertedAt
	}
	queries := []store.FindingQuery{
		{},
		{Severity: []string{"HIGH", "critical"}},
		{Severity: []string{"low"}, StatusCode: []string{"pass", "FAIL"}},
		{StatusCode: []string{"manual"}},
		{ProviderType: []string{"gcp"}},
		{ProviderType: []string{"AWS", "gcp"}, Region: "us-east-1"},
		{ProviderUID: "project-x"},
		{CheckID: "ec2_sg_open_22"},
		{Region: "eu-west-1"},
		{Region: "nowhere"},
		{ScanID: "scan-2"},
		{IngestionID: "ing-2"},
		{Search: "ROOT"},           // check id, any case
		{Search: "number 1"},       // title
		{Search: "uid-0"},          // uid (and UID-03 case-insensitively)
		{Search: "special-bucket"}, // resource uid
		{Search: "%"},              // a literal percent sign
		{Search: "f_b"},            // a literal underscore: not "f?b"
		{Search: "s3_", Severity: []string{"medium", "critical"}, ScanID: "scan-1"},
	}
	queries = append(queries, sortQueries...)
	for _, q := range queries {
		want := reference(fs, inserted, q)
		q.Page = store.Page{Size: 100}
		got, total, err := s.ListFindings(ctx, tenantA, q)
		must(t, err, fmt.Sprintf("ListFindings(%+v)", q))
		if total != len(want) || !slices.Equal(uids(got), uids(want)) {
			t.Errorf("ListFindings(%+v):\n got %d %v\nwant %d %v", q, total, uids(got), len(want), uids(want))
			continue
		}
		for i := range got {
			sameFinding(t, fmt.Sprintf("%+v row %d", q, i), got[i], want[i])
		}
	}
	if n := len(reference(fs, inserted, store.FindingQuery{Search: "f_b"})); n != 1 {
		t.Fatalf("fixture broken: search f_b matches %d", n)
	}

	// Pagination: default size 10, pages partition the sorted list, totals
	// stay the full count.
	want := reference(fs, inserted, store.FindingQuery{})
	var paged []store.Finding
	for p := 1; p <= 3; p++ {
		got, total, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Page: store.Page{Number: p}})
		must(t, err, "ListFindings page")
		if total != 25 || len(got) != []int{10, 10, 5}[p-1] {
			t.Fatalf("page %d: %d rows, total %d", p, len(got), total)
		}
		paged = append(paged, got...)
	}
	if !slices.Equal(uids(paged), uids(want)) {
		t.Fatalf("pages:\n got %v\nwant %v", uids(paged), uids(want))
	}
	got, total, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Page: store.Page{Number: 4, Size: 7}})
	must(t, err, "ListFindings page 4")
	if total != 25 || !slices.Equal(uids(got), uids(want[21:])) {
		t.Fatalf("page 4 of 7: %v, total %d", uids(got), total)
	}
	got, total, err = s.ListFindings(ctx, tenantA, store.FindingQuery{Page: store.Page{Number: 6, Size: 10}})
	must(t, err, "ListFindings past the end")
	if total != 25 || len(got) != 0 {
		t.Fatalf("past the end: %d rows total %d", len(got), total)
	}
	got, total, err = s.ListFindings(ctx, tenantA, store.FindingQuery{Severity: []string{"critical"}, Page: store.Page{Size: 2}})
	must(t, err, "ListFindings filtered page")
	if total != 5 || len(got) != 2 {
		t.Fatalf("filtered page: %d rows total %d", len(got), total)
	}

	// Tenant B sees its own three rows only.
	got, total, err = s.ListFindings(ctx, tenantB, store.FindingQuery{Page: store.Page{Size: 100}})
	must(t, err, "ListFindings tenant B")
	if total != 3 || len(got) != 3 {
		t.Fatalf("tenant B: %d rows total %d", len(got), total)
	}
	for _, f := range got {
		if f.ID != store.FindingID(tenantB, f.ScanID, f.UID) {
			t.Fatalf("tenant B got a row with id %s", f.ID)
		}
	}
	got, total, err = s.ListFindings(ctx, "tenant-none", store.FindingQuery{})
	must(t, err, "ListFindings unknown tenant")
	if total != 0 || len(got) != 0 {
		t.Fatalf("unknown tenant sees %d rows", total)
	}
}

// testListFindingsAfterKey walks every sort with keyset pages of a few
// rows: the pages must partition the sorted list exactly as offsets do,
// including across equal sort values (inserted_at is shared by a whole
// batch, severity_id by a fifth of the rows).
func testListFindingsAfterKey(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	fs := fixture(t, s)
	inserted := map[string]time.Time{}
	stored, _, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Page: store.Page{Size: 100}})
	must(t, err, "ListFindings")
	for _, f := range stored {
		inserted[f.ID] = f.InsertedAt
	}
	for _, q := range append(append([]store.FindingQuery{{}}, sortQueries...),
		store.FindingQuery{Sort: []string{"-inserted_at"}, Region: "eu-west-1", Search: "uid"}) {
		want := reference(fs, inserted, q)
		var got []store.Finding
		q.Page = store.Page{Size: 4}
		for range 20 {
			page, total, err := s.ListFindings(ctx, tenantA, q)
			must(t, err, fmt.Sprintf("ListFindings(%+v)", q))
			if total != len(want) {
				t.Fatalf("ListFindings(%+v): total %d, want %d", q, total, len(want))
			}
			got = append(got, page...)
			if len(page) < q.Page.Size {
				break
			}
			k := store.KeyOf(&page[len(page)-1])
			q.After = &k
			// A page number must not shift a keyset page.
			q.Page.Number = 3
		}
		if !slices.Equal(uids(got), uids(want)) {
			t.Errorf("keyset pages of sort %v:\n got %v\nwant %v", q.Sort, uids(got), uids(want))
		}
	}
}

func testListFindingsInvalidSort(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, sort := range [][]string{{"title"}, {"-raw"}, {"time", "severity"}, {"uid; DROP TABLE findings"}, {""}, {"-"}} {
		_, _, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Sort: sort})
		wantErr(t, err, store.ErrInvalidArgument, fmt.Sprintf("sort %q", sort))
	}
}

func testGetFinding(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	fixture(t, s)
	id := store.FindingID(tenantA, "scan-1", "uid-00")
	f, err := s.GetFinding(ctx, tenantA, id)
	must(t, err, "GetFinding")
	if f.ID != id || f.UID != "uid-00" {
		t.Fatalf("GetFinding = %+v", f)
	}
	// Tenant B holds the same uid in the same scan, under its own id.
	_, err = s.GetFinding(ctx, tenantB, id)
	wantErr(t, err, store.ErrNotFound, "GetFinding of tenant A's id by tenant B")
	idB := store.FindingID(tenantB, "scan-1", "uid-00")
	_, err = s.GetFinding(ctx, tenantA, idB)
	wantErr(t, err, store.ErrNotFound, "GetFinding of tenant B's id by tenant A")
	if _, err := s.GetFinding(ctx, tenantB, idB); err != nil {
		t.Fatalf("GetFinding tenant B: %v", err)
	}
	for _, bad := range []string{"", "not-a-uuid", "00000000-0000-0000-0000-000000000000"} {
		_, err = s.GetFinding(ctx, tenantA, bad)
		wantErr(t, err, store.ErrNotFound, fmt.Sprintf("GetFinding(%q)", bad))
	}
}

func testListScans(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 10), "StartRun")
	scans := []store.Scan{
		{ID: "s-aws-1", ProviderType: "aws", ProviderUID: "111", Trigger: "imported"},
		{ID: "s-aws-2", ProviderType: "AWS", ProviderUID: "222", Trigger: "imported"},
		{ID: "s-gcp", ProviderType: "gcp", ProviderUID: "p", Trigger: "imported"},
	}
	var fs []store.Finding
	for i := range 6 {
		fs = append(fs, finding("s-aws-1", fmt.Sprint("a", i)))
	}
	fs = append(fs, finding("s-gcp", "g1"))
	before := time.Now().Add(-time.Second)
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{Scans: scans[:1], Findings: fs}), "WriteBatch 1")
	time.Sleep(2 * time.Millisecond)
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, store.Batch{Scans: scans[1:]}), "WriteBatch 2")
	must(t, s.StartRun(ctx, tenantB, "ing-9", 1, 1), "StartRun B")
	must(t, s.WriteBatch(ctx, tenantB, "ing-9", 1, store.Batch{Scans: scans[:1], Findings: fs[:1]}), "WriteBatch B")

	all, total, err := s.ListScans(ctx, tenantA, store.ScanQuery{})
	must(t, err, "ListScans")
	if total != 3 || len(all) != 3 {
		t.Fatalf("ListScans: %d rows total %d", len(all), total)
	}
	counts := map[string]int{}
	for _, sc := range all {
		counts[sc.ID] = sc.FindingCount
		checkUTC(t, "InsertedAt", sc.InsertedAt)
		checkUTC(t, "UpdatedAt", sc.UpdatedAt)
		if sc.IngestionID != "ing-1" || sc.Trigger != "imported" || sc.InsertedAt.Before(before) {
			t.Errorf("scan %+v", sc)
		}
	}
	if !reflect.DeepEqual(counts, map[string]int{"s-aws-1": 6, "s-aws-2": 0, "s-gcp": 1}) {
		t.Fatalf("finding counts %v", counts)
	}
	// Newest first (the API's default order).
	if all[2].ID != "s-aws-1" {
		t.Fatalf("order: %s, %s, %s", all[0].ID, all[1].ID, all[2].ID)
	}
	// A scan's account, as the worker checks records against it; another
	// tenant's scan is not found.
	for _, tc := range []struct {
		tenant, id, providerType, providerUID string
		err                                   error
	}{
		{tenantA, "s-aws-2", "aws", "222", nil},
		{tenantA, "s-gcp", "gcp", "p", nil},
		{tenantB, "s-aws-1", "aws", "111", nil},
		{tenantB, "s-gcp", "", "", store.ErrNotFound},
		{tenantA, "s-none", "", "", store.ErrNotFound},
	} {
		pt, pu, err := s.ScanAccount(ctx, tc.tenant, tc.id)
		if pt != tc.providerType || pu != tc.providerUID || !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Errorf("ScanAccount(%s, %s) = %q, %q, %v; want %q, %q, %v", tc.tenant, tc.id, pt, pu, err, tc.providerType, tc.providerUID, tc.err)
		}
	}

	got, total, err := s.ListScans(ctx, tenantA, store.ScanQuery{ProviderType: "Aws"})
	must(t, err, "ListScans aws")
	if total != 2 || len(got) != 2 || got[0].ProviderType != "aws" || got[1].ProviderType != "aws" {
		t.Fatalf("ListScans aws: %+v total %d", got, total)
	}
	got, total, err = s.ListScans(ctx, tenantA, store.ScanQuery{ProviderType: "aws", ProviderUID: "222"})
	must(t, err, "ListScans aws 222")
	if total != 1 || len(got) != 1 || got[0].ID != "s-aws-2" {
		t.Fatalf("ListScans aws/222: %+v", got)
	}
	got, total, err = s.ListScans(ctx, tenantA, store.ScanQuery{Page: store.Page{Number: 2, Size: 2}})
	must(t, err, "ListScans page 2")
	if total != 3 || len(got) != 1 || got[0].ID != all[2].ID {
		t.Fatalf("ListScans page 2: %+v total %d", got, total)
	}

	got, total, err = s.ListScans(ctx, tenantB, store.ScanQuery{})
	must(t, err, "ListScans B")
	if total != 1 || len(got) != 1 || got[0].FindingCount != 1 || got[0].IngestionID != "ing-9" {
		t.Fatalf("tenant B scans: %+v total %d", got, total)
	}

	// By the ingestion that last wrote the scan (the aggregated API's
	// ingestion field selector); another tenant's ingestion selects none.
	must(t, s.StartRun(ctx, tenantA, "ing-2", 1, 1), "StartRun ing-2")
	must(t, s.WriteBatch(ctx, tenantA, "ing-2", 1, store.Batch{Scans: []store.Scan{
		{ID: "s-ing-2", ProviderType: "aws", ProviderUID: "333", Trigger: "imported"},
	}}), "WriteBatch ing-2")
	for _, tc := range []struct {
		tenant, ingestion string
		want              []string
	}{
		{tenantA, "ing-2", []string{"s-ing-2"}},
		{tenantA, "ing-1", []string{"s-aws-1", "s-aws-2", "s-gcp"}},
		{tenantA, "ing-9", nil},
		{tenantB, "ing-9", []string{"s-aws-1"}},
	} {
		got, total, err := s.ListScans(ctx, tc.tenant, store.ScanQuery{IngestionID: tc.ingestion})
		must(t, err, "ListScans by ingestion")
		var ids []string
		for _, sc := range got {
			ids = append(ids, sc.ID)
		}
		slices.Sort(ids)
		if total != len(tc.want) || !slices.Equal(ids, tc.want) {
			t.Errorf("ListScans(%s, ingestion %s) = %v (total %d), want %v", tc.tenant, tc.ingestion, ids, total, tc.want)
		}
	}
}

// checkBoundedGroups checks groups counted under a count limit that the
// matches pass: each group within its true count (truth, keyed by the
// group's values joined by "|"), and the first limit+1 findings in all.
func checkBoundedGroups(t *testing.T, what string, got []store.FindingGroup, truth map[string]int, limit int) {
	t.Helper()
	sum := 0
	for _, g := range got {
		sum += g.Count
		if n := truth[strings.Join(g.Values, "|")]; g.Count > n {
			t.Errorf("%s: group %v counts %d, more than its %d findings", what, g.Values, g.Count, n)
		}
	}
	if sum != limit+1 {
		t.Errorf("%s: the groups count %d findings, want the first %d", what, sum, limit+1)
	}
}

func testFindingCounts(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	fs := fixture(t, s)
	value := func(f store.Finding, dim string) string {
		switch dim {
		case "severity":
			return f.Severity
		case "status_code":
			return f.StatusCode
		case "provider_type":
			return f.ProviderType
		case "provider_uid":
			return f.ProviderUID
		case "check_id":
			return f.CheckID
		case "region":
			return f.Region
		}
		t.Fatalf("no dimension %q", dim)
		return ""
	}
	for _, tc := range []struct {
		by []string
		q  store.FindingQuery
	}{
		{by: []string{"severity"}},
		{by: []string{"status_code"}},
		{by: []string{"provider_type"}},
		{by: []string{"region"}},
		{by: []string{"check_id", "status_code"}},
		{by: []string{"severity", "status_code", "provider_type", "provider_uid", "check_id", "region"}},
		{by: []string{"severity"}, q: store.FindingQuery{StatusCode: []string{"fail"}}},
		{by: []string{"provider_uid", "status_code"}, q: store.FindingQuery{Region: "eu-west-1", ScanID: "scan-1"}},
		{by: []string{"check_id"}, q: store.FindingQuery{Search: "bucket", Severity: []string{"LOW", "high"}}},
		{by: []string{"region"}, q: store.FindingQuery{CheckID: "none-such"}},
		// A search's counts stop at CountLimit+1 matches; under the limit
		// they are exact, past it every group is a lower bound.
		{by: []string{"check_id", "status_code"}, q: store.FindingQuery{Search: "bucket", CountLimit: 2}},
		{by: []string{"check_id"}, q: store.FindingQuery{Search: "bucket", CountLimit: 1000}},
	} {
		counts := map[string]int{}
		for _, f := range reference(fs, nil, tc.q) {
			var vals []string
			for _, d := range tc.by {
				vals = append(vals, value(f, d))
			}
			counts[strings.Join(vals, "|")]++
		}
		var want []store.FindingGroup
		for k, n := range counts {
			want = append(want, store.FindingGroup{Values: strings.Split(k, "|"), Count: n})
		}
		slices.SortFunc(want, func(a, b store.FindingGroup) int { return slices.Compare(a.Values, b.Values) })
		if want == nil {
			want = []store.FindingGroup{}
		}
		got, err := s.FindingCounts(ctx, tenantA, tc.q, tc.by)
		must(t, err, fmt.Sprintf("FindingCounts(%v, %+v)", tc.by, tc.q))
		if limit := tc.q.CountLimit; limit > 0 && len(reference(fs, nil, tc.q)) > limit {
			checkBoundedGroups(t, fmt.Sprintf("FindingCounts(%v, %+v)", tc.by, tc.q), got, counts, limit)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("FindingCounts(%v, %+v):\n got %v\nwant %v", tc.by, tc.q, got, want)
		}
	}
	got, err := s.FindingCounts(ctx, tenantB, store.FindingQuery{}, []string{"severity"})
	must(t, err, "FindingCounts B")
	total := 0
	for _, g := range got {
		total += g.Count
	}
	if total != 3 {
		t.Fatalf("tenant B counts %v", got)
	}
	got, err = s.FindingCounts(ctx, "tenant-none", store.FindingQuery{}, []string{"severity"})
	must(t, err, "FindingCounts unknown tenant")
	if len(got) != 0 {
		t.Fatalf("unknown tenant counts %v", got)
	}
	for _, by := range [][]string{nil, {""}, {"title"}, {"severity; --"}, {"raw"}, {"severity", "severity"}} {
		_, err := s.FindingCounts(ctx, tenantA, store.FindingQuery{}, by)
		wantErr(t, err, store.ErrInvalidArgument, fmt.Sprintf("FindingCounts(%q)", by))
	}
}

// testConcurrent checks that readers are not blocked or failed by a writer:
// the embedded engine has a single writer, and a reader must not get
// "database is locked" while it writes.
func testConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	blob, err := s.PutBlob(ctx, tenantA, patternReader(4, 2<<20+1))
	must(t, err, "PutBlob")
	rc, err := s.OpenBlob(ctx, tenantA, blob.ID)
	must(t, err, "OpenBlob")
	defer rc.Close()
	h := sha256.New()
	// Read part of the blob, write a lot meanwhile, then read the rest.
	if _, err := io.CopyN(h, rc, 1<<20+5); err != nil {
		t.Fatalf("read first part: %v", err)
	}

	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, 0), "StartRun")
	const writers, batches, perBatch = 2, 10, 50
	var wg sync.WaitGroup
	errc := make(chan error, writers*batches+100)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				var fs []store.Finding
				for i := range perBatch {
					fs = append(fs, finding(fmt.Sprint("scan-", w), fmt.Sprintf("w%d-b%d-%d", w, b, i)))
				}
				if err := s.WriteBatch(ctx, tenantA, "ing-1", 1, batchOf(fs...)); err != nil {
					errc <- fmt.Errorf("WriteBatch: %w", err)
				}
				if err := s.UpdateRun(ctx, tenantA, "ing-1", 1, store.Progress{Processed: b}); err != nil {
					errc <- fmt.Errorf("UpdateRun: %w", err)
				}
			}
		})
	}
	done := make(chan struct{})
	var readers sync.WaitGroup
	for range 3 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, _, err := s.ListFindings(ctx, tenantA, store.FindingQuery{Search: "w1"}); err != nil {
					errc <- fmt.Errorf("ListFindings: %w", err)
					return
				}
				if _, err := s.GetRun(ctx, tenantA, "ing-1"); err != nil {
					errc <- fmt.Errorf("GetRun: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	expectFindings(t, s, tenantA, store.FindingQuery{}, writers*batches*perBatch)

	if _, err := io.Copy(h, rc); err != nil {
		t.Fatalf("read rest of blob: %v", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != blob.SHA256 {
		t.Fatalf("blob read across writes: sha256 %s, want %s", got, blob.SHA256)
	}
}

// sortQueries list every documented findings sort, each way, with one
// combined with a filter: the orders a listing and a cursor must both keep.
var sortQueries = []store.FindingQuery{
	{Sort: []string{"time"}},
	{Sort: []string{"-time"}},
	{Sort: []string{"severity_id"}},
	{Sort: []string{"-severity_id"}},
	{Sort: []string{"inserted_at"}},
	{Sort: []string{"-inserted_at"}},
	{Sort: []string{"check_id", "-time"}},
	{Sort: []string{"-check_id"}},
	{Sort: []string{"uid"}},
	{Sort: []string{"-uid"}},
	{Sort: []string{"-time", "severity_id"}, StatusCode: []string{"FAIL"}},
}

// testEndedSessions: an ended session is known to every reader of the store
// (each replica), and is forgotten only once its tokens would have expired.
func testEndedSessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	ss, ok := s.(store.Sessions)
	if !ok {
		t.Fatalf("%T does not implement store.Sessions", s)
	}
	ended := func(id string) bool {
		t.Helper()
		got, err := ss.SessionEnded(ctx, id)
		must(t, err, "SessionEnded "+id)
		return got
	}
	if ended("s-1") {
		t.Fatal("a session no one ended is ended")
	}
	must(t, ss.EndSession(ctx, "s-1", time.Now().Add(time.Hour)), "EndSession")
	must(t, ss.EndSession(ctx, "s-1", time.Now().Add(time.Minute)), "EndSession again")
	must(t, ss.EndSession(ctx, "s-past", time.Now().Add(-time.Second)), "EndSession of a session already over")
	if !ended("s-1") || ended("s-2") {
		t.Fatalf("s-1 ended %t, s-2 ended %t; want true, false", ended("s-1"), ended("s-2"))
	}
	// The next sign-out prunes what can no longer be used.
	must(t, ss.EndSession(ctx, "s-3", time.Now().Add(time.Hour)), "EndSession s-3")
	if ended("s-past") || !ended("s-1") || !ended("s-3") {
		t.Errorf("after pruning: s-past %t, s-1 %t, s-3 %t; want false, true, true", ended("s-past"), ended("s-1"), ended("s-3"))
	}
}
