package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// EndSession implements store.Sessions.
func (s *Store) EndSession(ctx context.Context, id string, until time.Time) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM ended_sessions WHERE ends_at <= now()`); err != nil {
			return fmt.Errorf("postgres: prune ended sessions: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO ended_sessions (id, ends_at) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET ends_at = greatest(ended_sessions.ends_at, excluded.ends_at)`, id, until); err != nil {
			return fmt.Errorf("postgres: end session: %w", err)
		}
		return nil
	})
}

// SessionEnded implements store.Sessions.
func (s *Store) SessionEnded(ctx context.Context, id string) (bool, error) {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM ended_sessions WHERE id = $1`, id).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("postgres: look up session: %w", err)
	}
	return true, nil
}
