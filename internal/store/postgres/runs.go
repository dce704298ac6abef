package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// StartRun implements store.Store.
func (s *Store) StartRun(ctx context.Context, tenant, ingestionID string, attempt int, total int) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// FOR UPDATE waits for every WriteBatch in flight (each holds a key
		// share lock on the row), so that none of the old attempt's rows can
		// land after the errors are cleared below. The upsert alone would not
		// wait: it changes no key column, so its lock is compatible with
		// theirs. The upsert's WHERE makes "not older than the stored
		// attempt" part of the statement that resets the row.
		if err := lockRun(ctx, tx, tenant, ingestionID); err != nil {
			return fmt.Errorf("postgres: start run: %w", err)
		}
		var got int
		err := tx.QueryRow(ctx, `
INSERT INTO runs (tenant, ingestion_id, attempt, status, total, processed, invalid, message, started_at, updated_at, finished_at)
VALUES ($1, $2, $3, $4, $5, 0, 0, '', $6, $6, NULL)
ON CONFLICT (tenant, ingestion_id) DO UPDATE SET
    attempt = excluded.attempt, status = excluded.status, total = excluded.total,
    processed = 0, invalid = 0, message = '',
    started_at = excluded.started_at, updated_at = excluded.updated_at, finished_at = NULL
WHERE runs.attempt < excluded.attempt OR (runs.attempt = excluded.attempt AND runs.finished_at IS NULL)
RETURNING attempt`,
			tenant, ingestionID, attempt, string(store.RunRunning), total, engine.Now()).Scan(&got)
		if isNoRows(err) {
			return store.ErrStaleAttempt
		}
		if err != nil {
			return fmt.Errorf("postgres: start run: %w", err)
		}
		if _, err := tx.Exec(ctx,
			`DELETE FROM ingestion_errors WHERE tenant = $1 AND ingestion_id = $2`,
			tenant, ingestionID); err != nil {
			return fmt.Errorf("postgres: start run: clear errors: %w", err)
		}
		return nil
	})
}

// UpdateRun implements store.Store.
func (s *Store) UpdateRun(ctx context.Context, tenant, ingestionID string, attempt int, p store.Progress) error {
	// A plain UPDATE of columns outside the key: it does not wait for the
	// batches in flight, whose key share locks it is compatible with.
	tag, err := s.pool.Exec(ctx, `
UPDATE runs SET processed = $1, invalid = $2, updated_at = $3
WHERE tenant = $4 AND ingestion_id = $5 AND attempt = $6 AND finished_at IS NULL`,
		p.Processed, p.Invalid, engine.Now(), tenant, ingestionID, attempt)
	if err != nil {
		return fmt.Errorf("postgres: update run: %w", err)
	}
	return s.checkRunWrite(ctx, tag, tenant, ingestionID)
}

// FinishRun implements store.Store.
func (s *Store) FinishRun(ctx context.Context, tenant, ingestionID string, attempt int, o store.Outcome) error {
	if err := engine.ValidOutcome(o); err != nil {
		return err
	}
	var tag pgconn.CommandTag
	finish := func(tx pgx.Tx) error {
		// As in StartRun: no batch of this attempt may commit after its
		// outcome (the controller records one when a Job fails, and the pod
		// may still be writing), so wait for those in flight.
		if err := lockRun(ctx, tx, tenant, ingestionID); err != nil {
			return err
		}
		var err error
		now := engine.Now()
		tag, err = tx.Exec(ctx, `
UPDATE runs SET status = $1, processed = $2, invalid = $3, message = $4, updated_at = $5, finished_at = $5
WHERE tenant = $6 AND ingestion_id = $7 AND attempt = $8 AND finished_at IS NULL`,
			string(o.Status), o.Processed, o.Invalid, o.Message, now, tenant, ingestionID, attempt)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		if o.Status == store.RunSucceeded {
			// The run's lock has waited out every batch in flight: the
			// scans it wrote are all there.
			if _, err := tx.Exec(ctx, engine.MergeLock, tenant); err != nil {
				return fmt.Errorf("wait for the tenant's other merges into the current state: %w", err)
			}
			var merge int64
			if err := tx.QueryRow(ctx, engine.NextMerge(engine.Postgres), tenant).Scan(&merge); err != nil {
				return fmt.Errorf("number the merge into the current state: %w", err)
			}
			for _, st := range engine.CurrentMerge(engine.Postgres, tenant, ingestionID, merge) {
				if _, err := tx.Exec(ctx, st.SQL, st.Args...); err != nil {
					return fmt.Errorf("merge into the current state: %w", err)
				}
			}
			return nil
		}
		// The run's lock has waited out every batch in flight, and later ones
		// see it finished: no write of this ingestion can follow.
		if _, err := tx.Exec(ctx, restoreRewritten, tenant, ingestionID); err != nil {
			return fmt.Errorf("give back rewritten findings: %w", err)
		}
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, finish)
	for deadlocks := 0; isDeadlock(err) && deadlocks < maxDeadlockRetries; deadlocks++ {
		// Giving findings back locks them in index order while another
		// ingestion's batch may be upserting some of them in its own
		// order. PostgreSQL aborted this side, which wrote nothing: run it
		// again.
		err = pgx.BeginFunc(ctx, s.pool, finish)
	}
	if err != nil {
		return fmt.Errorf("postgres: finish run: %w", err)
	}
	return s.checkRunWrite(ctx, tag, tenant, ingestionID)
}

// FlushSearchIndex implements store.SearchIndexFlusher: it moves the
// search index's pending list into the index. GIN keeps new entries in an
// unsorted pending list (up to gin_pending_list_limit, 4 MB) that every
// search reads whole, so a search's cost depended on how much was written
// since the list was last merged. At 10 million findings the list one
// ingestion left behind was two thirds of the pages a rare search read
// (406 pages against 145; 11–15 ms against 7–9 for the index scan).
// Merging it when an ingestion ends does the work that the next insert
// past the limit, or autovacuum, would have done, before anyone searches;
// a full list took about 160 ms there.
func (s *Store) FlushSearchIndex(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `SELECT gin_clean_pending_list('findings_search'::regclass)`); err != nil {
		return fmt.Errorf("postgres: flush the search index's pending list: %w", err)
	}
	return nil
}

// restoreRewritten attributes the findings a failed ingestion rewrote to the
// ingestion that wrote them before it; those it was first to write stay its.
// It finds them through the (tenant, ingestion_id) index.
const restoreRewritten = `
UPDATE findings SET ingestion_id = prev_ingestion_id, prev_ingestion_id = NULL
WHERE tenant = $1 AND ingestion_id = $2 AND prev_ingestion_id IS NOT NULL`

// lockRun takes the run's row lock that conflicts with the key share locks
// of batches in flight, waiting for them to end. A missing row locks
// nothing: no batch can be in flight without it.
func lockRun(ctx context.Context, tx pgx.Tx, tenant, ingestionID string) error {
	_, err := tx.Exec(ctx, `SELECT 1 FROM runs WHERE tenant = $1 AND ingestion_id = $2 FOR UPDATE`, tenant, ingestionID)
	return err
}

// checkRunWrite tells a stale attempt from a missing run once a guarded
// UPDATE matched nothing. Runs are never deleted, so the answer cannot go
// stale between the two statements.
func (s *Store) checkRunWrite(ctx context.Context, tag pgconn.CommandTag, tenant, ingestionID string) error {
	if tag.RowsAffected() > 0 {
		return nil
	}
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM runs WHERE tenant = $1 AND ingestion_id = $2`,
		tenant, ingestionID).Scan(&one)
	if isNoRows(err) {
		return store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("postgres: check run: %w", err)
	}
	return store.ErrStaleAttempt
}

// GetRun implements store.Store.
func (s *Store) GetRun(ctx context.Context, tenant, ingestionID string) (store.Run, error) {
	var (
		r      store.Run
		status string
		fin    *time.Time
	)
	err := s.pool.QueryRow(ctx, `
SELECT ingestion_id, attempt, status, total, processed, invalid, message, started_at, updated_at, finished_at
FROM runs WHERE tenant = $1 AND ingestion_id = $2`, tenant, ingestionID).Scan(
		&r.IngestionID, &r.Attempt, &status, &r.Total, &r.Processed, &r.Invalid, &r.Message,
		&r.StartedAt, &r.UpdatedAt, &fin)
	if isNoRows(err) {
		return store.Run{}, store.ErrNotFound
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("postgres: get run: %w", err)
	}
	r.Status = store.RunStatus(status)
	r.StartedAt, r.UpdatedAt, r.FinishedAt = utc(r.StartedAt), utc(r.UpdatedAt), utcPtr(fin)
	return r, nil
}

// ListIngestionErrors implements store.Store.
func (s *Store) ListIngestionErrors(ctx context.Context, tenant, ingestionID string, page store.Page) ([]store.IngestionError, int, error) {
	var total int
	if err := s.pool.QueryRow(ctx,
		`SELECT count(*) FROM ingestion_errors WHERE tenant = $1 AND ingestion_id = $2`,
		tenant, ingestionID).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("postgres: count ingestion errors: %w", err)
	}
	limit, offset := engine.Limit(page)
	rows, err := s.pool.Query(ctx, `
SELECT id, record_index, finding_uid, code, detail, pointer, value
FROM ingestion_errors WHERE tenant = $1 AND ingestion_id = $2
ORDER BY record_index NULLS FIRST, id
LIMIT $3 OFFSET $4`, tenant, ingestionID, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: list ingestion errors: %w", err)
	}
	out := []store.IngestionError{}
	var e store.IngestionError
	_, err = pgx.ForEachRow(rows, []any{&e.ID, &e.RecordIndex, &e.FindingUID, &e.Code, &e.Detail, &e.Pointer, &e.Value}, func() error {
		out = append(out, e)
		// Scan reuses the pointer target; the next row needs its own.
		e.RecordIndex = nil
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: list ingestion errors: %w", err)
	}
	return out, total, nil
}

// IngestionErrorCodes implements store.Store.
func (s *Store) IngestionErrorCodes(ctx context.Context, tenant, ingestionID string) (map[string]int, error) {
	rows, err := s.pool.Query(ctx,
		`SELECT code, count(*) FROM ingestion_errors WHERE tenant = $1 AND ingestion_id = $2 GROUP BY code`,
		tenant, ingestionID)
	if err != nil {
		return nil, fmt.Errorf("postgres: count ingestion errors by code: %w", err)
	}
	out := map[string]int{}
	var (
		code string
		n    int
	)
	if _, err := pgx.ForEachRow(rows, []any{&code, &n}, func() error { out[code] = n; return nil }); err != nil {
		return nil, fmt.Errorf("postgres: count ingestion errors by code: %w", err)
	}
	return out, nil
}
