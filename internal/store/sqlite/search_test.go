package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// TestSearchIndexInStep writes findings new, rewritten with other text,
// rewritten with the same text, and back, and after each batch asks FTS5
// to compare findings_search with the findings it indexes
// ('integrity-check' with rank 1 compares against the content table). An
// entry left for text a finding no longer has, or a finding left out,
// fails it; the search results alone could not show a stale entry, since
// LIKE tests every candidate.
func TestSearchIndexInStep(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "search.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batch := func(title func(i int) string, from, to int) []store.Finding {
		var fs []store.Finding
		for i := from; i < to; i++ {
			fs = append(fs, store.Finding{UID: fmt.Sprintf("uid-%d", i), ScanID: "scan-1", CheckID: fmt.Sprintf("check_%d", i%3),
				Title: title(i), ResourceUID: fmt.Sprintf("arn:aws:s3:::bucket-%d", i), Time: time.Now(), Raw: []byte(`{}`)})
		}
		return fs
	}
	first := func(i int) string { return fmt.Sprintf("first title %d", i) }
	second := func(i int) string { return fmt.Sprintf("second title %d", i) }
	for i, step := range []struct {
		name string
		fs   []store.Finding
	}{
		{"new findings", batch(first, 0, 50)},
		{"the same findings again", batch(first, 0, 50)},
		{"half rewritten with other text, and new ones", append(batch(second, 0, 25), batch(first, 50, 60)...)},
		{"other text and the same text in one batch", append(batch(first, 0, 10), batch(first, 25, 60)...)},
		{"every finding with other text", batch(second, 0, 60)},
	} {
		ing := fmt.Sprintf("ing-%d", i)
		if err := s.StartRun(ctx, "t", ing, 1, len(step.fs)); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteBatch(ctx, "t", ing, 1, store.Batch{Findings: step.fs}); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if _, err := s.w.ExecContext(ctx, `INSERT INTO findings_search (findings_search, rank) VALUES ('integrity-check', 1)`); err != nil {
			t.Fatalf("after %s: findings_search is out of step with findings: %v", step.name, err)
		}
	}
	// The check itself: an entry for text no finding has is found.
	if _, err := s.w.ExecContext(ctx, `INSERT INTO findings_search (rowid, uid, title, check_id, resource_uid)
SELECT rowid, 'x', 'stale text', 'x', 'x' FROM findings LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO findings_search (findings_search, rank) VALUES ('integrity-check', 1)`); err == nil {
		t.Fatal("integrity-check passed an entry for text no finding has")
	}
}

// TestUpgradeIndexesSearchAndLatest opens a database written before the
// search index and the latest scans existed: the upgrade indexes the
// stored findings' text and builds the current state from the findings of
// runs that did not fail or still run: per account and check (one here),
// the run of the same event time inserted last.
func TestUpgradeIndexesSearchAndLatest(t *testing.T) {
	ctx := context.Background()
	s := upgradedFrom(t, 4, `
INSERT INTO runs (tenant, ingestion_id, attempt, status, started_at, updated_at, finished_at) VALUES
    ('t', 'ing-a', 1, 'succeeded', 0, 100, 100),
    ('t', 'ing-b', 1, 'succeeded', 0, 200, 200),
    ('t', 'ing-c', 1, 'failed', 0, 300, 300),
    ('t', 'ing-d', 1, 'running', 0, 400, NULL);
INSERT INTO scans (tenant, id, provider_type, provider_uid, ingestion_id, inserted_at, updated_at) VALUES
    ('t', 's-a', 'aws', '111', 'ing-a', 1, 1),
    ('t', 's-b', 'aws', '111', 'ing-b', 2, 2),
    ('t', 's-c', 'aws', '111', 'ing-c', 3, 3),
    ('t', 's-d', 'aws', '111', 'ing-d', 4, 4),
    ('t', 's-g', 'gcp', 'proj', 'ing-a', 1, 1);
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, title, provider_type, provider_uid, event_time, raw, inserted_at, updated_at)
SELECT 'id-' || id, 't', id, 'uid-' || id, ingestion_id, 'Old title in ' || id, provider_type, provider_uid, 0, x'7b7d', inserted_at, inserted_at FROM scans;`)
	scans := func(q store.FindingQuery) []string {
		t.Helper()
		q.Sort, q.Page = []string{"uid"}, store.Page{Size: 10}
		found, _, err := s.ListFindings(ctx, "t", q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range found {
			out = append(out, f.ScanID)
		}
		return out
	}
	if got := scans(store.FindingQuery{Latest: true}); !slices.Equal(got, []string{"s-b", "s-g"}) {
		t.Errorf("latest scans after the upgrade: %v, want [s-b s-g]", got)
	}
	if got := scans(store.FindingQuery{Search: "TITLE IN S-C"}); !slices.Equal(got, []string{"s-c"}) {
		t.Errorf("search after the upgrade: %v, want [s-c]", got)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO findings_search (findings_search, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Errorf("findings_search after the upgrade: %v", err)
	}
}
