package postgres

import (
	"context"
	"testing"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
	"github.com/posture-dev/posture/internal/store/storetest"
)

// TestFindingSummary holds the finding summary equal to a GROUP BY over
// the findings through a random history of writes (storetest.RunSummary).
func TestFindingSummary(t *testing.T) {
	s := openFresh(t)
	storetest.RunSummary(t, s, summaryDB(s))
}

// summaryDB reads and writes the database under s behind its back.
func summaryDB(s *Store) storetest.SummaryDB {
	return storetest.SummaryDB{
		Dialect: engine.Postgres,
		Groups: func(ctx context.Context, st engine.Statement, dims int) ([]store.FindingGroup, error) {
			rows, err := s.pool.Query(ctx, st.SQL, st.Args...)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			return engine.ScanGroups(rows, dims)
		},
		Count: func(ctx context.Context, st engine.Statement) (int, error) {
			var n int
			err := s.pool.QueryRow(ctx, st.SQL, st.Args...).Scan(&n)
			return n, err
		},
		Exec: func(ctx context.Context, st engine.Statement) error {
			_, err := s.pool.Exec(ctx, st.SQL, st.Args...)
			return err
		},
	}
}
