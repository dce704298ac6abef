package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// StartRun implements store.Store.
func (s *Store) StartRun(ctx context.Context, tenant, ingestionID string, attempt int, total int) error {
	now := micros(engine.Now())
	return s.inTx(ctx, func(tx *sql.Tx) error {
		// The WHERE on the upsert makes "not older than the stored attempt"
		// part of the same statement that resets the row.
		var got int
		err := tx.QueryRowContext(ctx, `
INSERT INTO runs (tenant, ingestion_id, attempt, status, total, processed, invalid, message, started_at, updated_at, finished_at)
VALUES (?1, ?2, ?3, ?4, ?5, 0, 0, '', ?6, ?6, NULL)
ON CONFLICT (tenant, ingestion_id) DO UPDATE SET
    attempt = excluded.attempt, status = excluded.status, total = excluded.total,
    processed = 0, invalid = 0, message = '',
    started_at = excluded.started_at, updated_at = excluded.updated_at, finished_at = NULL
WHERE runs.attempt < excluded.attempt OR (runs.attempt = excluded.attempt AND runs.finished_at IS NULL)
RETURNING attempt`,
			tenant, ingestionID, attempt, string(store.RunRunning), total, now).Scan(&got)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrStaleAttempt
		}
		if err != nil {
			return fmt.Errorf("sqlite: start run: %w", err)
		}
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM ingestion_errors WHERE tenant = ?1 AND ingestion_id = ?2`,
			tenant, ingestionID); err != nil {
			return fmt.Errorf("sqlite: start run: clear errors: %w", err)
		}
		return nil
	})
}

// UpdateRun implements store.Store.
func (s *Store) UpdateRun(ctx context.Context, tenant, ingestionID string, attempt int, p store.Progress) error {
	res, err := s.w.ExecContext(ctx, `
UPDATE runs SET processed = ?1, invalid = ?2, updated_at = ?3
WHERE tenant = ?4 AND ingestion_id = ?5 AND attempt = ?6 AND finished_at IS NULL`,
		p.Processed, p.Invalid, micros(engine.Now()), tenant, ingestionID, attempt)
	if err != nil {
		return fmt.Errorf("sqlite: update run: %w", err)
	}
	return s.checkRunWrite(ctx, res, tenant, ingestionID)
}

// FinishRun implements store.Store.
func (s *Store) FinishRun(ctx context.Context, tenant, ingestionID string, attempt int, o store.Outcome) error {
	if err := engine.ValidOutcome(o); err != nil {
		return err
	}
	now := micros(engine.Now())
	var res sql.Result
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		res, err = tx.ExecContext(ctx, `
UPDATE runs SET status = ?1, processed = ?2, invalid = ?3, message = ?4, updated_at = ?5, finished_at = ?5
WHERE tenant = ?6 AND ingestion_id = ?7 AND attempt = ?8 AND finished_at IS NULL`,
			string(o.Status), o.Processed, o.Invalid, o.Message, now, tenant, ingestionID, attempt)
		if err != nil {
			return fmt.Errorf("sqlite: finish run: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		if o.Status == store.RunSucceeded {
			// One writer: no other merge can run between these.
			var merge int64
			if err := tx.QueryRowContext(ctx, engine.NextMerge(engine.SQLite), tenant).Scan(&merge); err != nil {
				return fmt.Errorf("sqlite: finish run: number the merge into the current state: %w", err)
			}
			for _, st := range engine.CurrentMerge(engine.SQLite, tenant, ingestionID, merge) {
				if _, err := tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
					return fmt.Errorf("sqlite: finish run: merge into the current state: %w", err)
				}
			}
			return nil
		}
		if _, err := tx.ExecContext(ctx, restoreRewritten, tenant, ingestionID); err != nil {
			return fmt.Errorf("sqlite: finish run: give back rewritten findings: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.checkRunWrite(ctx, res, tenant, ingestionID)
}

// restoreRewritten attributes the findings a failed ingestion rewrote to the
// ingestion that wrote them before it; those it was first to write stay its.
const restoreRewritten = `
UPDATE findings SET ingestion_id = prev_ingestion_id, prev_ingestion_id = NULL
WHERE tenant = ?1 AND ingestion_id = ?2 AND prev_ingestion_id IS NOT NULL`

// checkRunWrite tells a stale attempt from a missing run once a guarded
// UPDATE matched nothing.
func (s *Store) checkRunWrite(ctx context.Context, res sql.Result, tenant, ingestionID string) error {
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	var one int
	err := s.w.QueryRowContext(ctx, `SELECT 1 FROM runs WHERE tenant = ?1 AND ingestion_id = ?2`,
		tenant, ingestionID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("sqlite: check run: %w", err)
	}
	return store.ErrStaleAttempt
}

// GetRun implements store.Store.
func (s *Store) GetRun(ctx context.Context, tenant, ingestionID string) (store.Run, error) {
	var (
		r                store.Run
		status           string
		started, updated int64
		finished         sql.NullInt64
	)
	err := s.r.QueryRowContext(ctx, `
SELECT ingestion_id, attempt, status, total, processed, invalid, message, started_at, updated_at, finished_at
FROM runs WHERE tenant = ?1 AND ingestion_id = ?2`, tenant, ingestionID).Scan(
		&r.IngestionID, &r.Attempt, &status, &r.Total, &r.Processed, &r.Invalid, &r.Message,
		&started, &updated, &finished)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Run{}, store.ErrNotFound
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("sqlite: get run: %w", err)
	}
	r.Status = store.RunStatus(status)
	r.StartedAt, r.UpdatedAt = fromMicros(started), fromMicros(updated)
	if finished.Valid {
		t := fromMicros(finished.Int64)
		r.FinishedAt = &t
	}
	return r, nil
}

// ListIngestionErrors implements store.Store.
func (s *Store) ListIngestionErrors(ctx context.Context, tenant, ingestionID string, page store.Page) ([]store.IngestionError, int, error) {
	var total int
	if err := s.r.QueryRowContext(ctx,
		`SELECT count(*) FROM ingestion_errors WHERE tenant = ?1 AND ingestion_id = ?2`,
		tenant, ingestionID).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("sqlite: count ingestion errors: %w", err)
	}
	limit, offset := engine.Limit(page)
	rows, err := s.r.QueryContext(ctx, `
SELECT id, record_index, finding_uid, code, detail, pointer, value
FROM ingestion_errors WHERE tenant = ?1 AND ingestion_id = ?2
ORDER BY record_index NULLS FIRST, id
LIMIT ?3 OFFSET ?4`, tenant, ingestionID, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: list ingestion errors: %w", err)
	}
	defer rows.Close()
	out := []store.IngestionError{}
	for rows.Next() {
		var e store.IngestionError
		var idx sql.NullInt64
		if err := rows.Scan(&e.ID, &idx, &e.FindingUID, &e.Code, &e.Detail, &e.Pointer, &e.Value); err != nil {
			return nil, 0, fmt.Errorf("sqlite: list ingestion errors: %w", err)
		}
		if idx.Valid {
			i := int(idx.Int64)
			e.RecordIndex = &i
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("sqlite: list ingestion errors: %w", err)
	}
	return out, total, nil
}

// IngestionErrorCodes implements store.Store.
func (s *Store) IngestionErrorCodes(ctx context.Context, tenant, ingestionID string) (map[string]int, error) {
	rows, err := s.r.QueryContext(ctx,
		`SELECT code, count(*) FROM ingestion_errors WHERE tenant = ?1 AND ingestion_id = ?2 GROUP BY code`,
		tenant, ingestionID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: count ingestion errors by code: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			code string
			n    int
		)
		if err := rows.Scan(&code, &n); err != nil {
			return nil, fmt.Errorf("sqlite: count ingestion errors by code: %w", err)
		}
		out[code] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: count ingestion errors by code: %w", err)
	}
	return out, nil
}
