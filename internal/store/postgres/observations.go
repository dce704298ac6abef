package postgres

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// FindingObservations implements store.Store.
func (s *Store) FindingObservations(ctx context.Context, tenant string, q store.ObservationQuery) ([]store.Observation, int, error) {
	count, page := engine.Observations(engine.Postgres, tenant, q)
	var total int
	if err := s.pool.QueryRow(ctx, count.SQL, count.Args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("postgres: count the observations of finding uid %q: %w", q.UID, err)
	}
	rows, err := s.pool.Query(ctx, page.SQL, page.Args...)
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: list the observations of finding uid %q: %w", q.UID, err)
	}
	out := []store.Observation{}
	var (
		o  store.Observation
		id uuid.UUID
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &o.ScanID, &o.IngestionID, &o.StatusCode, &o.Status, &o.Severity, &o.SeverityID,
		&o.Time, &o.InsertedAt}, func() error {
		c := o
		c.ID = id.String()
		c.Time, c.InsertedAt = utc(c.Time), utc(c.InsertedAt)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: list the observations of finding uid %q: %w", q.UID, err)
	}
	return out, total, nil
}
