package postgres

import (
	"context"
	"os"
	"testing"

	"github.com/go-logr/logr"

	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/store"
)

// An ingestion leaves nothing in the search index's pending list: the
// worker flushes it once the run has succeeded, so that no search reads
// the ingestion's entries one by one. Writing alone leaves them there,
// which is what the test would see if the worker did not flush.
func TestIngestionFlushesTheSearchIndex(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t)
	pending := func() int {
		t.Helper()
		// gin_clean_pending_list returns the pages it moved into the
		// index; counting them empties the list for the next check.
		var pages int
		if err := s.pool.QueryRow(ctx, `SELECT gin_clean_pending_list('findings_search'::regclass)`).Scan(&pages); err != nil {
			t.Fatal(err)
		}
		return pages
	}
	report, err := os.Open("../../ocsf/testdata/prowler/aws_1500_records.ocsf.json")
	if err != nil {
		t.Fatal(err)
	}
	defer report.Close()
	blob, err := s.PutBlob(ctx, "t1", report)
	if err != nil {
		t.Fatal(err)
	}
	w := &ingest.Worker{Store: s, Log: logr.Discard()}
	if err := w.Run(ctx, ingest.Job{Tenant: "t1", IngestionID: "first", BlobID: blob.ID, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetRun(ctx, "t1", "first"); err != nil || r.Status != store.RunSucceeded {
		t.Fatalf("run first = %+v (%v)", r, err)
	}
	if n := pending(); n != 0 {
		t.Errorf("%d pages left in the pending list after an ingestion, want 0", n)
	}
	// The control: the same findings written again without the worker's
	// flush are left pending.
	if err := s.StartRun(ctx, "t1", "second", 1, 0); err != nil {
		t.Fatal(err)
	}
	fs, _, err := s.ListFindings(ctx, "t1", store.FindingQuery{Page: store.Page{Number: 1, Size: 100}})
	if err != nil || len(fs) == 0 {
		t.Fatalf("findings: %d (%v)", len(fs), err)
	}
	if err := s.WriteBatch(ctx, "t1", "second", 1, store.Batch{Findings: fs}); err != nil {
		t.Fatal(err)
	}
	if n := pending(); n == 0 {
		t.Error("written findings left no pending pages, so the check above cannot fail")
	}
}
