package sqlite

import (
	"context"
	"path/filepath"
	"testing"

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
	storetest.RunSummary(t, s, storetest.SummaryDB{
		Dialect: engine.SQLite,
		Groups: func(ctx context.Context, st engine.Statement, dims int) ([]store.FindingGroup, error) {
			rows, err := s.r.QueryContext(ctx, st.SQL, st.Args...)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			return engine.ScanGroups(rows, dims)
		},
		Exec: func(ctx context.Context, st engine.Statement) error {
			_, err := s.w.ExecContext(ctx, st.SQL, st.Args...)
			return err
		},
	})
}
