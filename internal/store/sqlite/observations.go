package sqlite

import (
	"context"
	"fmt"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// FindingObservations implements store.Store.
func (s *Store) FindingObservations(ctx context.Context, tenant string, q store.ObservationQuery) ([]store.Observation, int, error) {
	count, page := engine.Observations(engine.SQLite, tenant, q)
	var total int
	if err := s.r.QueryRowContext(ctx, count.SQL, count.Args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("sqlite: count the observations of finding uid %q: %w", q.UID, err)
	}
	rows, err := s.r.QueryContext(ctx, page.SQL, page.Args...)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: list the observations of finding uid %q: %w", q.UID, err)
	}
	defer rows.Close()
	out := []store.Observation{}
	for rows.Next() {
		var (
			o         store.Observation
			t, insert int64
		)
		if err := rows.Scan(&o.ID, &o.ScanID, &o.IngestionID, &o.StatusCode, &o.Status, &o.Severity, &o.SeverityID, &t, &insert); err != nil {
			return nil, 0, fmt.Errorf("sqlite: list the observations of finding uid %q: %w", q.UID, err)
		}
		o.Time, o.InsertedAt = fromMicros(t), fromMicros(insert)
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("sqlite: list the observations of finding uid %q: %w", q.UID, err)
	}
	return out, total, nil
}
