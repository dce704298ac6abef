package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// muteTx runs the mute statements (engine.MuteTx) in a transaction.
type muteTx struct{ tx *sql.Tx }

func (m muteTx) Exec(ctx context.Context, st engine.Statement) error {
	_, err := m.tx.ExecContext(ctx, st.SQL, st.Args...)
	return err
}

func (m muteTx) Query(ctx context.Context, st engine.Statement) (engine.Rows, func(), error) {
	rows, err := m.tx.QueryContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, nil, err
	}
	return rows, func() { rows.Close() }, nil
}

// PutMuteRule implements store.Mutes.
func (s *Store) PutMuteRule(ctx context.Context, tenant string, r store.MuteRule) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if err := engine.PutMuteRule(ctx, muteTx{tx}, engine.SQLite, tenant, r); err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
		return nil
	})
}

// ApplyMuteRule implements store.Mutes.
func (s *Store) ApplyMuteRule(ctx context.Context, tenant, name string, limit int) (p store.MuteProgress, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		p, err = engine.ApplyMuteRule(ctx, muteTx{tx}, engine.SQLite, tenant, name, limit)
		if err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
		return nil
	})
	return p, err
}

// DeleteMuteRule implements store.Mutes.
func (s *Store) DeleteMuteRule(ctx context.Context, tenant, name string) error {
	st := engine.DeleteMuteRule(engine.SQLite, tenant, name)
	if _, err := s.w.ExecContext(ctx, st.SQL, st.Args...); err != nil {
		return fmt.Errorf("sqlite: delete mute rule %s: %w", name, err)
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
		args = append(args, out[i].ID)
	}
	rows, err := s.r.QueryContext(ctx, engine.MuteMarks(engine.SQLite, len(out)), args...)
	if err != nil {
		return fmt.Errorf("sqlite: read mute marks: %w", err)
	}
	defer rows.Close()
	if err := engine.ReadMuteMarks(rows, out); err != nil {
		return fmt.Errorf("sqlite: read mute marks: %w", err)
	}
	return nil
}
