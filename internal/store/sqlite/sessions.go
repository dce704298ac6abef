package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// EndSession implements store.Sessions.
func (s *Store) EndSession(ctx context.Context, id string, until time.Time) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM ended_sessions WHERE ends_at <= ?1`, micros(time.Now())); err != nil {
			return fmt.Errorf("sqlite: prune ended sessions: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO ended_sessions (id, ends_at) VALUES (?1, ?2)
			ON CONFLICT (id) DO UPDATE SET ends_at = max(ends_at, excluded.ends_at)`, id, micros(until)); err != nil {
			return fmt.Errorf("sqlite: end session: %w", err)
		}
		return nil
	})
}

// SessionEnded implements store.Sessions.
func (s *Store) SessionEnded(ctx context.Context, id string) (bool, error) {
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM ended_sessions WHERE id = ?1`, id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("sqlite: look up session: %w", err)
	}
	return true, nil
}
