// Package storetest is the conformance suite every store.Store engine must
// pass. Engines call Run from their own tests with a function that opens a
// fresh, empty store.
package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
		{"FindingObservations", testFindingObservations},
		{"ListScans", testListScans},
		{"FindingCounts", testFindingCounts},
		{"SearchSemantics", testSearchSemantics},
		{"Latest", testLatest},
		{"LatestOrders", testLatestOrders},
		{"CurrentState", testCurrentState},
		{"CurrentInterleavings", testCurrentInterleavings},
		{"ScanAccountRace", testScanAccountRace},
		{"LatestTiesAcrossScans", testLatestTiesAcrossScans},
		{"ConcurrentReadsAndWrites", testConcurrent},
		{"DeleteRunKeepsFindings", testDeleteRun},
		{"DeleteTenantData", testDeleteTenantData},
		{"EndedSessions", testEndedSessions},
		{"MuteRules", testMuteRules},
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
