package postgres

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// muteTx runs the mute statements (engine.MuteTx) in a transaction.
type muteTx struct{ tx pgx.Tx }

func (m muteTx) Exec(ctx context.Context, st engine.Statement) error {
	_, err := m.tx.Exec(ctx, st.SQL, st.Args...)
	return err
}

func (m muteTx) Query(ctx context.Context, st engine.Statement) (engine.Rows, func(), error) {
	rows, err := m.tx.Query(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, nil, err
	}
	return rows, rows.Close, nil
}

// PutMuteRule implements store.Mutes.
func (s *Store) PutMuteRule(ctx context.Context, tenant string, r store.MuteRule) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := engine.PutMuteRule(ctx, muteTx{tx}, engine.Postgres, tenant, r); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		return nil
	})
}

// ApplyMuteRule implements store.Mutes.
func (s *Store) ApplyMuteRule(ctx context.Context, tenant, name string, limit int) (p store.MuteProgress, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		p, err = engine.ApplyMuteRule(ctx, muteTx{tx}, engine.Postgres, tenant, name, limit)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		return nil
	})
	return p, err
}

// DeleteMuteRule implements store.Mutes.
func (s *Store) DeleteMuteRule(ctx context.Context, tenant, name string) error {
	st := engine.DeleteMuteRule(engine.Postgres, tenant, name)
	if _, err := s.pool.Exec(ctx, st.SQL, st.Args...); err != nil {
		return fmt.Errorf("postgres: delete mute rule %s: %w", name, err)
	}
	return nil
}

// readMarks puts their mute marks on the findings out.
func (s *Store) readMarks(ctx context.Context, tenant string, out []store.Finding) error {
	if len(out) == 0 {
		return nil
	}
	args := []any{tenant}
	for i := range out {
		id, err := uuid.Parse(out[i].ID)
		if err != nil {
			return fmt.Errorf("postgres: read mute marks: %w", err)
		}
		args = append(args, id)
	}
	rows, err := s.pool.Query(ctx, engine.MuteMarks(engine.Postgres, len(out)), args...)
	if err != nil {
		return fmt.Errorf("postgres: read mute marks: %w", err)
	}
	defer rows.Close()
	if err := engine.ReadMuteMarks(rows, out); err != nil {
		return fmt.Errorf("postgres: read mute marks: %w", err)
	}
	return nil
}
