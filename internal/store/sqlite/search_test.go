package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
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
