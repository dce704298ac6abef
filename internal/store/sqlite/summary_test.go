package sqlite

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
	"github.com/posture-dev/posture/internal/store/storetest"
)

// TestFindingSummary holds the finding summary equal to a GROUP BY over
// the findings through a random history of writes (storetest.RunSummary).
func TestFindingSummary(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "summary.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.RunSummary(t, s, summaryDB(s))
}

// summaryDB reads and writes the database under s behind its back.
func summaryDB(s *Store) storetest.SummaryDB {
	return storetest.SummaryDB{
		Dialect: engine.SQLite,
		Groups: func(ctx context.Context, st engine.Statement, dims int) ([]store.FindingGroup, error) {
			rows, err := s.r.QueryContext(ctx, st.SQL, st.Args...)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			return engine.ScanGroups(rows, dims)
		},
		Count: func(ctx context.Context, st engine.Statement) (int, error) {
			var n int
			err := s.r.QueryRowContext(ctx, st.SQL, st.Args...).Scan(&n)
			return n, err
		},
		Exec: func(ctx context.Context, st engine.Statement) error {
			_, err := s.w.ExecContext(ctx, st.SQL, st.Args...)
			return err
		},
	}
}

// TestBatchMaintenanceMatchesRowTriggers writes the same random history
// (storetest.PlayHistory: ingestions with rewrites and duplicates,
// failed ingestions giving findings back, stale attempts, deletes) to two
// stores: one as it is, which counts a batch's new findings into the
// summaries and widens their scans' bounds once per batch, and one with
// the row triggers that did it finding by finding until migration 00016
// (its Down), WriteBatch leaving the three out. The summaries, zeros
// included, and the bounds must be the same rows.
func TestBatchMaintenanceMatchesRowTriggers(t *testing.T) {
	ctx := context.Background()
	open := func(name string) (*Store, storetest.SummaryDB) {
		s, err := Open(ctx, filepath.Join(t.TempDir(), name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, storetest.SummaryDB{Dialect: engine.SQLite, Exec: func(ctx context.Context, st engine.Statement) error {
			_, err := s.w.ExecContext(ctx, st.SQL, st.Args...)
			return err
		}}
	}
	batch, batchDB := open("batch.db")
	rows, rowsDB := open("rows.db")
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, rows.w, fsys, goose.WithAllowOutofOrder(true))
	if err != nil {
		t.Fatal(err)
	}
	// Undo 00016 alone: the migrations after it stay (those they add are
	// what FinishRun writes).
	if _, err := p.DownTo(ctx, 15); err != nil {
		t.Fatalf("undo migration 00016 and those after it: %v", err)
	}
	for _, src := range p.ListSources() {
		if src.Version > 16 {
			if _, err := p.ApplyVersion(ctx, src.Version, true); err != nil {
				t.Fatalf("apply migration %d again: %v", src.Version, err)
			}
		}
	}
	rows.LeaveOut(store.StructureSummary, store.StructureScanSummary, store.StructureSpans)

	for _, seed := range []uint64{1, 2, 3} {
		storetest.PlayHistory(t, batch, batchDB, seed, 60)
		storetest.PlayHistory(t, rows, rowsDB, seed, 60)
		for _, q := range []string{
			`SELECT tenant, status_code, provider_type, provider_uid, severity, region, check_id, n FROM finding_counts ORDER BY 1, 2, 3, 4, 5, 6, 7`,
			`SELECT tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n FROM scan_finding_counts ORDER BY 1, 2, 3, 4, 5, 6, 7, 8`,
			// Each store stamps its own insertion times: they are compared
			// by their rank among all the insertion times it holds.
			`WITH times AS (SELECT inserted_at AS t FROM findings UNION SELECT first_inserted FROM scan_bounds UNION SELECT last_inserted FROM scan_bounds)
SELECT tenant, scan_id, (SELECT count(*) FROM times WHERE t < b.first_inserted), (SELECT count(*) FROM times WHERE t < b.last_inserted),
    first_event, last_event
FROM scan_bounds b ORDER BY 1, 2`,
		} {
			got, want := tableRows(t, batch, q), tableRows(t, rows, q)
			if len(want) == 0 {
				t.Fatalf("seed %d: %s: no rows", seed, q)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d: %s:\nbatch maintenance: %q\nrow triggers:      %q", seed, q, got, want)
			}
		}
	}
}

// tableRows renders each row of q, its columns joined by spaces.
func tableRows(t *testing.T, s *Store, q string) []string {
	t.Helper()
	rows, err := s.r.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(cols))
		for i, v := range vals {
			parts[i] = fmt.Sprint(v)
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
