package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// insertFinding writes a new finding. It is a plain INSERT, one row a
// statement, so SQLite keeps no statement journal for it: no trigger fires
// on the insert (WriteBatch maintains the summaries, the scans' bounds and
// the search index for the whole batch at once), and a single-row insert
// without triggers cannot fail half-way through several rows.
const insertFinding = `
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, check_id, title, severity, severity_id,
    status_code, status, region, provider_type, provider_uid, resource_uid, event_time, raw, inserted_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?18)`

// rewriteFinding writes a finding that is already stored. Its triggers keep
// the summaries and the scan's bounds for what the rewrite changes: a
// dimension (rare; a re-scan keeps them), or an event time past the
// scan's bounds.
const rewriteFinding = `
UPDATE findings SET
    -- The right-hand sides see the stored row: the previous owner is kept
    -- for FinishRun to restore should this ingestion fail.
    prev_ingestion_id = CASE WHEN ingestion_id = ?3 THEN prev_ingestion_id ELSE ingestion_id END,
    ingestion_id = ?3, check_id = ?4, title = ?5, severity = ?6, severity_id = ?7, status_code = ?8,
    status = ?9, region = ?10, provider_type = ?11, provider_uid = ?12, resource_uid = ?13,
    event_time = ?14, raw = ?15, updated_at = ?16
WHERE rowid = ?1 AND id = ?2`

const upsertScan = `
INSERT INTO scans (tenant, id, provider_type, provider_uid, scan_trigger, ingestion_id, inserted_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)
ON CONFLICT (tenant, id) DO UPDATE SET
    scan_trigger = excluded.scan_trigger, ingestion_id = excluded.ingestion_id, updated_at = excluded.updated_at
WHERE scans.provider_type = excluded.provider_type AND scans.provider_uid = excluded.provider_uid`

// recordScan notes that an ingestion wrote a scan: what its merge into
// the current state reads (engine.CurrentMerge).
const recordScan = `INSERT INTO ingestion_scans (tenant, ingestion_id, scan_id) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING`

const insertError = `
INSERT INTO ingestion_errors (tenant, ingestion_id, attempt, record_index, finding_uid, code, detail, pointer, value)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)`

// WriteBatch implements store.Store.
func (s *Store) WriteBatch(ctx context.Context, tenant, ingestionID string, attempt int, in store.Batch) error {
	now := engine.Now()
	b, err := engine.PrepareBatch(tenant, ingestionID, in, now)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		// BEGIN IMMEDIATE already holds the write lock, so no StartRun can
		// slip in between this check and the commit, and no other writer
		// between reading the stored findings and writing them.
		var stored int
		var finished sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT attempt, finished_at FROM runs WHERE tenant = ?1 AND ingestion_id = ?2`,
			tenant, ingestionID).Scan(&stored, &finished)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("sqlite: write batch: %w", err)
		}
		if stored != attempt || finished.Valid {
			return store.ErrStaleAttempt
		}
		ts := micros(now)
		var search searchUpdate
		if len(b.Findings) > 0 {
			if search, err = s.writeFindings(ctx, tx, tenant, ingestionID, ts, b.Findings); err != nil {
				return err
			}
			if err := engine.MarkFindings(ctx, muteTx{tx}, engine.SQLite, tenant, b.Findings, now); err != nil {
				return fmt.Errorf("sqlite: %w", err)
			}
		}
		for _, sc := range b.Scans {
			res, err := tx.ExecContext(ctx, upsertScan, tenant, sc.ID, sc.ProviderType, sc.ProviderUID,
				sc.Trigger, ingestionID, ts)
			if err != nil {
				return fmt.Errorf("sqlite: write scan %q: %w", sc.ID, err)
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return fmt.Errorf("sqlite: write scan %q of account %s/%s: %w", sc.ID, sc.ProviderType, sc.ProviderUID, store.ErrScanAccount)
			}
			if _, err := tx.ExecContext(ctx, recordScan, tenant, ingestionID, sc.ID); err != nil {
				return fmt.Errorf("sqlite: record scan %q of the ingestion: %w", sc.ID, err)
			}
		}
		if len(b.Errors) > 0 {
			st, err := tx.PrepareContext(ctx, insertError)
			if err != nil {
				return fmt.Errorf("sqlite: write ingestion errors: %w", err)
			}
			defer st.Close()
			for _, e := range b.Errors {
				var idx any
				if e.RecordIndex != nil {
					idx = *e.RecordIndex
				}
				if _, err := st.ExecContext(ctx, tenant, ingestionID, attempt, idx, e.FindingUID, e.Code,
					e.Detail, e.Pointer, e.Value); err != nil {
					return fmt.Errorf("sqlite: write ingestion error: %w", err)
				}
			}
		}
		// Last: FTS5 writes its pending entries to disk at each statement
		// that follows a write to it.
		return search.apply(ctx, tx)
	})
}

// storedText is what findings_search indexed for a stored finding: an FTS5
// table over external content can only delete an entry given that text.
type storedText struct {
	rowid                            int64
	uid, title, checkID, resourceUID string
}

// writeFindings stores a prepared batch's findings and brings what is
// derived from them in step, set by set: the new findings' groups of both
// summaries (one upsert a group), their scans' bounds (one a scan) and the
// search index (two statements), where triggers once did it finding by
// finding (docs/decisions/0021-maintenance-by-batch.md). A rewritten
// finding's changes to the summaries and the bounds are its triggers'. The
// search index's changes are returned, for WriteBatch to apply last.
func (s *Store) writeFindings(ctx context.Context, tx *sql.Tx, tenant, ingestionID string, ts int64, fs []store.Finding) (searchUpdate, error) {
	var search searchUpdate
	stored, err := readStored(ctx, tx, fs)
	if err != nil {
		return search, err
	}
	ins, err := tx.PrepareContext(ctx, insertFinding)
	if err != nil {
		return search, fmt.Errorf("sqlite: write findings: %w", err)
	}
	defer ins.Close()
	var rw *sql.Stmt
	added := make([]store.Finding, 0, len(fs))
	for i := range fs {
		f := &fs[i]
		old, ok := stored[f.ID]
		if !ok {
			res, err := ins.ExecContext(ctx, f.ID, tenant, f.ScanID, f.UID, ingestionID, f.CheckID, f.Title,
				f.Severity, f.SeverityID, f.StatusCode, f.Status, f.Region, f.ProviderType, f.ProviderUID,
				f.ResourceUID, micros(f.Time), f.Raw, ts)
			if err != nil {
				return search, fmt.Errorf("sqlite: write finding %q: %w", f.UID, err)
			}
			rowid, err := res.LastInsertId()
			if err != nil {
				return search, fmt.Errorf("sqlite: write finding %q: %w", f.UID, err)
			}
			search.fresh = append(search.fresh, rowid)
			added = append(added, *f)
			continue
		}
		if rw == nil {
			if rw, err = tx.PrepareContext(ctx, rewriteFinding); err != nil {
				return search, fmt.Errorf("sqlite: write findings: %w", err)
			}
			defer rw.Close()
		}
		if _, err := rw.ExecContext(ctx, old.rowid, f.ID, ingestionID, f.CheckID, f.Title, f.Severity, f.SeverityID,
			f.StatusCode, f.Status, f.Region, f.ProviderType, f.ProviderUID, f.ResourceUID, micros(f.Time), f.Raw, ts); err != nil {
			return search, fmt.Errorf("sqlite: write finding %q: %w", f.UID, err)
		}
		// A rewrite with the same text (a re-scan) leaves the index as it is.
		if old.uid != f.UID || old.title != f.Title || old.checkID != f.CheckID || old.resourceUID != f.ResourceUID {
			search.stale = append(search.stale, []any{old.rowid, old.uid, old.title, old.checkID, old.resourceUID})
			search.rowids = append(search.rowids, old.rowid)
		}
	}
	if s.leftOut[store.StructureSearch] {
		search = searchUpdate{}
	}
	if err := addToSummaries(ctx, tx, tenant, added, s.leftOut); err != nil {
		return search, err
	}
	if s.leftOut[store.StructureSpans] {
		return search, nil
	}
	return search, widenBounds(ctx, tx, tenant, added)
}

// readStored reads the batch's findings that are already stored: their
// rowids, and the text the search index holds for them.
func readStored(ctx context.Context, tx *sql.Tx, fs []store.Finding) (map[string]storedText, error) {
	ids := make([]string, len(fs))
	for i, f := range fs {
		ids[i] = f.ID
	}
	list, _ := json.Marshal(ids)
	rows, err := tx.QueryContext(ctx, `SELECT id, rowid, uid, title, check_id, resource_uid FROM findings
WHERE id IN (SELECT value FROM json_each(?1))`, string(list))
	if err != nil {
		return nil, fmt.Errorf("sqlite: read the stored findings of a batch: %w", err)
	}
	defer rows.Close()
	stored := map[string]storedText{}
	for rows.Next() {
		var id string
		var t storedText
		if err := rows.Scan(&id, &t.rowid, &t.uid, &t.title, &t.checkID, &t.resourceUID); err != nil {
			return nil, fmt.Errorf("sqlite: read the stored findings of a batch: %w", err)
		}
		stored[id] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read the stored findings of a batch: %w", err)
	}
	return stored, nil
}

// addToSummaries counts new findings into both finding summaries, one
// upsert per group the batch touches, with one prepared statement a table:
// a batch of scanner findings touches about as many groups as it has
// findings, and decoding the groups from one JSON document cost more
// than binding them.
func addToSummaries(ctx context.Context, tx *sql.Tx, tenant string, added []store.Finding, leftOut map[string]bool) error {
	if len(added) == 0 {
		return nil
	}
	for _, t := range []struct {
		table  string
		byScan bool
	}{
		{engine.ScanSummaryTable, true},
		{engine.SummaryTable, false},
	} {
		if (t.byScan && leftOut[store.StructureScanSummary]) || (!t.byScan && leftOut[store.StructureSummary]) {
			continue
		}
		groups := engine.SummarizeByTenant(added)
		if t.byScan {
			groups = engine.SummarizeByScan(added)
		}
		cols, vals := "tenant, ", "?1, "
		if t.byScan {
			cols, vals = "tenant, scan_id, ", "?1, ?2, "
		}
		cols += "status_code, provider_type, provider_uid, severity, region, check_id"
		vals += "?3, ?4, ?5, ?6, ?7, ?8, ?9"
		st, err := tx.PrepareContext(ctx, `INSERT INTO `+t.table+` (`+cols+`, n) VALUES (`+vals+`)
ON CONFLICT (`+cols+`) DO UPDATE SET n = n + excluded.n`)
		if err != nil {
			return fmt.Errorf("sqlite: count new findings into %s: %w", t.table, err)
		}
		defer st.Close()
		for _, g := range groups {
			if _, err := st.ExecContext(ctx, tenant, g.ScanID, g.StatusCode, g.ProviderType, g.ProviderUID, g.Severity,
				g.Region, g.CheckID, g.N); err != nil {
				return fmt.Errorf("sqlite: count new findings into %s: %w", t.table, err)
			}
		}
	}
	return nil
}

// widenBounds widens the bounds of the new findings' scans to them, one
// upsert per scan, which writes only when a bound moves.
func widenBounds(ctx context.Context, tx *sql.Tx, tenant string, added []store.Finding) error {
	for _, s := range engine.ScanSpans(added) {
		if _, err := tx.ExecContext(ctx, `
INSERT INTO `+engine.ScanBoundsTable+` (tenant, scan_id, first_inserted, last_inserted, first_event, last_event)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (tenant, scan_id) DO UPDATE SET
    first_inserted = min(first_inserted, excluded.first_inserted), last_inserted = max(last_inserted, excluded.last_inserted),
    first_event = min(first_event, excluded.first_event), last_event = max(last_event, excluded.last_event)
WHERE excluded.first_inserted < first_inserted OR excluded.last_inserted > last_inserted
    OR excluded.first_event < first_event OR excluded.last_event > last_event`,
			tenant, s.ScanID, micros(s.FirstInserted), micros(s.LastInserted), micros(s.FirstEvent), micros(s.LastEvent)); err != nil {
			return fmt.Errorf("sqlite: widen the scans' bounds: %w", err)
		}
	}
	return nil
}

// searchUpdate is what a batch changes in findings_search: the entries of
// stored findings whose searched text it rewrites, to delete, and the
// findings it adds or rewrites, to index.
type searchUpdate struct {
	stale []any // [rowid, uid, title, check_id, resource_uid] as stored
	// fresh are the rowids of the new findings: one writer inserting them
	// one after the other gives them consecutive rowids, and they are then
	// indexed by range.
	fresh []int64
	// rowids are the rewritten findings, indexed one by one.
	rowids []int64
}

// apply brings findings_search in step with the written findings, in at
// most three statements whatever the batch's size: FTS5 writes its pending
// entries to disk at every statement that follows a write to it, so a
// statement per finding made a segment per finding. The new findings' text
// is read back by their rowids' range, from pages the batch just wrote.
func (u searchUpdate) apply(ctx context.Context, tx *sql.Tx) error {
	if len(u.stale) > 0 {
		stale, _ := json.Marshal(u.stale)
		if _, err := tx.ExecContext(ctx, `
INSERT INTO findings_search (findings_search, rowid, uid, title, check_id, resource_uid)
SELECT 'delete', value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 FROM json_each(?1)`, string(stale)); err != nil {
			return fmt.Errorf("sqlite: unindex the rewritten findings' text: %w", err)
		}
	}
	rowids := u.rowids
	if n := len(u.fresh); n > 0 {
		first, last := u.fresh[0], u.fresh[n-1]
		if consecutive(u.fresh) {
			if _, err := tx.ExecContext(ctx, `
INSERT INTO findings_search (rowid, uid, title, check_id, resource_uid)
SELECT rowid, uid, title, check_id, resource_uid FROM findings WHERE rowid BETWEEN ?1 AND ?2`, first, last); err != nil {
				return fmt.Errorf("sqlite: index the findings' text: %w", err)
			}
		} else {
			rowids = append(rowids, u.fresh...)
		}
	}
	if len(rowids) > 0 {
		list, _ := json.Marshal(rowids)
		if _, err := tx.ExecContext(ctx, `
INSERT INTO findings_search (rowid, uid, title, check_id, resource_uid)
SELECT rowid, uid, title, check_id, resource_uid FROM findings WHERE rowid IN (SELECT value FROM json_each(?1))`, string(list)); err != nil {
			return fmt.Errorf("sqlite: index the findings' text: %w", err)
		}
	}
	return nil
}

// consecutive reports whether rowids run one by one from the first.
func consecutive(rowids []int64) bool {
	for i, r := range rowids {
		if r != rowids[0]+int64(i) {
			return false
		}
	}
	return true
}

type scanner interface{ Scan(dest ...any) error }

func scanFinding(row scanner) (store.Finding, error) {
	var (
		f                    store.Finding
		t, inserted, updated int64
	)
	err := row.Scan(&f.ID, &f.UID, &f.ScanID, &f.IngestionID, &f.CheckID, &f.Title, &f.Severity, &f.SeverityID,
		&f.StatusCode, &f.Status, &f.Region, &f.ProviderType, &f.ProviderUID, &f.ResourceUID, &t, &f.Raw,
		&inserted, &updated)
	if err != nil {
		return store.Finding{}, err
	}
	if f.Raw == nil {
		f.Raw = []byte{}
	}
	f.Time, f.InsertedAt, f.UpdatedAt = fromMicros(t), fromMicros(inserted), fromMicros(updated)
	return f, nil
}

// ListFindings implements store.Store.
func (s *Store) ListFindings(ctx context.Context, tenant string, q store.FindingQuery) ([]store.Finding, int, error) {
	count, page, err := engine.FindingList(engine.SQLite, tenant, q)
	if err != nil {
		return nil, 0, err
	}
	walk, common, err := s.commonSearch(ctx, tenant, q)
	if err != nil {
		return nil, 0, err
	}
	var out []store.Finding
	var total int
	if !common {
		out, total, err = s.listFindings(ctx, q, count, page)
	} else {
		out, total, err = s.listByWalk(ctx, tenant, q, walk, count, page)
	}
	if err != nil {
		return nil, 0, err
	}
	if err := s.annotate(ctx, tenant, q, out); err != nil {
		return nil, 0, err
	}
	if err := s.readMarks(ctx, tenant, out); err != nil {
		return nil, 0, err
	}
	return out, total, nil
}

// annotate adds to a listing of the current state when each finding was
// first seen and its delta (engine.Annotations).
func (s *Store) annotate(ctx context.Context, tenant string, q store.FindingQuery, out []store.Finding) error {
	if !engine.Annotated(q) || len(out) == 0 {
		return nil
	}
	args := []any{tenant}
	at := make(map[string]*store.Finding, len(out))
	for i := range out {
		args = append(args, out[i].ID)
		at[out[i].ID] = &out[i]
	}
	rows, err := s.r.QueryContext(ctx, engine.Annotations(engine.SQLite, len(out)), args...)
	if err != nil {
		return fmt.Errorf("sqlite: annotate findings: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, delta string
		var first sql.NullInt64
		if err := rows.Scan(&id, &first, &delta); err != nil {
			return fmt.Errorf("sqlite: annotate findings: %w", err)
		}
		if f := at[id]; f != nil {
			if first.Valid {
				t := time.UnixMicro(first.Int64).UTC()
				f.FirstSeenAt = &t
			}
			f.Delta = engine.AnnotatedDelta(q, delta)
		}
	}
	return rows.Err()
}

// listByWalk answers a common search by walking (engine.FindingListWalk)
// at most walk findings, and asks the trigram index (count and page,
// FindingList's statements) only for what the walk did not reach: a page
// it could not fill, a count it could not take past q.CountLimit.
func (s *Store) listByWalk(ctx context.Context, tenant string, q store.FindingQuery, walk int, count, page engine.Statement) ([]store.Finding, int, error) {
	walkCount, walkPage, err := engine.FindingListWalk(engine.SQLite, tenant, q, walk)
	if err != nil {
		return nil, 0, err
	}
	total, err := s.countFindings(ctx, walkCount)
	if err != nil {
		return nil, 0, err
	}
	if total <= q.CountLimit {
		if total, err = s.countFindings(ctx, count); err != nil {
			return nil, 0, err
		}
	}
	rows, err := s.findingRows(ctx, walkPage)
	if err != nil {
		return nil, 0, err
	}
	if limit, _ := engine.Limit(q.Page); len(rows) < limit {
		if rows, err = s.findingRows(ctx, page); err != nil {
			return nil, 0, err
		}
	}
	return rows, total, nil
}

// walkSpread is how many times the findings a walk is expected to read
// (for an evenly spread text) it may read before the index is asked
// instead: room for a text that is less common where the walk starts.
const walkSpread = 4

// commonSearch decides whether q's search is better walked than looked up,
// and how far the walk may go. A page and its count need the first need
// matches in the order; among total findings holding m matches, evenly
// spread, a walk reads need × total / m findings and a lookup hands over
// m. The two cost the same at m = √(need × total), so a text is common
// when the index holds that many candidates for it (counting them stops
// there: a common text costs that many index entries, never all of
// them). The candidates are every tenant's, which only makes a text look
// more common than it is in a small tenant of a large database, where the
// walk is short anyway.
func (s *Store) commonSearch(ctx context.Context, tenant string, q store.FindingQuery) (walk int, common bool, err error) {
	if !engine.Walkable(q) || q.CountLimit <= 0 {
		return 0, false, nil
	}
	limit, offset := engine.Limit(q.Page)
	if q.After != nil {
		offset = 0
	}
	need := max(offset+limit, q.CountLimit) + 1
	var total int64
	if err := s.r.QueryRowContext(ctx, `SELECT coalesce(sum(n), 0) FROM `+engine.SummaryTable+` WHERE tenant = ?1`, tenant).Scan(&total); err != nil {
		return 0, false, fmt.Errorf("sqlite: count findings: %w", err)
	}
	threshold := int(math.Sqrt(float64(need) * float64(total)))
	if threshold == 0 {
		return 0, false, nil
	}
	candidates, err := s.countFindings(ctx, engine.SearchCandidates(q, threshold))
	if err != nil {
		return 0, false, err
	}
	return walkSpread * threshold, candidates >= threshold, nil
}

func (s *Store) listFindings(ctx context.Context, q store.FindingQuery, count, page engine.Statement) ([]store.Finding, int, error) {
	rows, err := s.findingRows(ctx, page)
	if err != nil {
		return nil, 0, err
	}
	total, known := engine.ShortPageCount(q, len(rows))
	if !known {
		if total, err = s.countFindings(ctx, count); err != nil {
			return nil, 0, err
		}
	}
	return rows, total, nil
}

func (s *Store) countFindings(ctx context.Context, st engine.Statement) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, st.SQL, st.Args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count findings: %w", err)
	}
	return n, nil
}

func (s *Store) findingRows(ctx context.Context, st engine.Statement) ([]store.Finding, error) {
	rows, err := s.r.QueryContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list findings: %w", err)
	}
	defer rows.Close()
	out := []store.Finding{}
	for rows.Next() {
		f, err := scanFinding(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list findings: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list findings: %w", err)
	}
	return out, nil
}

// GetFinding implements store.Store.
func (s *Store) GetFinding(ctx context.Context, tenant, id string) (store.Finding, error) {
	f, err := scanFinding(s.r.QueryRowContext(ctx,
		`SELECT `+engine.FindingColumns+` FROM findings WHERE id = ?1 AND tenant = ?2`, id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Finding{}, store.ErrNotFound
	}
	if err != nil {
		return store.Finding{}, fmt.Errorf("sqlite: get finding: %w", err)
	}
	one := []store.Finding{f}
	if err := s.readMarks(ctx, tenant, one); err != nil {
		return store.Finding{}, err
	}
	return one[0], nil
}

// ListScans implements store.Store.
func (s *Store) ListScans(ctx context.Context, tenant string, q store.ScanQuery) ([]store.Scan, int, error) {
	a := engine.NewArgs(engine.SQLite)
	where := engine.ScanWhere(a, tenant, q)
	var total int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM scans s WHERE `+where, a.Vals...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("sqlite: count scans: %w", err)
	}
	limit, offset := engine.Limit(q.Page)
	rows, err := s.r.QueryContext(ctx, `
SELECT s.id, s.provider_type, s.provider_uid, s.scan_trigger, s.ingestion_id, s.inserted_at, s.updated_at,
    (SELECT count(*) FROM findings f WHERE f.tenant = s.tenant AND f.scan_id = s.id), b.first_event
FROM scans s LEFT JOIN `+engine.ScanBoundsTable+` b ON b.tenant = s.tenant AND b.scan_id = s.id
WHERE `+where+`
ORDER BY s.inserted_at DESC, s.id
LIMIT `+a.Add(limit)+` OFFSET `+a.Add(offset), a.Vals...)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: list scans: %w", err)
	}
	defer rows.Close()
	out := []store.Scan{}
	ids := []string{}
	for rows.Next() {
		var sc store.Scan
		var inserted, updated int64
		var scanned sql.NullInt64
		if err := rows.Scan(&sc.ID, &sc.ProviderType, &sc.ProviderUID, &sc.Trigger, &sc.IngestionID,
			&inserted, &updated, &sc.FindingCount, &scanned); err != nil {
			return nil, 0, fmt.Errorf("sqlite: list scans: %w", err)
		}
		sc.InsertedAt, sc.UpdatedAt = fromMicros(inserted), fromMicros(updated)
		if scanned.Valid {
			sc.ScannedAt = fromMicros(scanned.Int64)
		}
		out = append(out, sc)
		ids = append(ids, sc.ID)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("sqlite: list scans: %w", err)
	}
	if len(ids) == 0 {
		return out, total, nil
	}
	st := engine.ScanFailures(engine.SQLite, tenant, ids)
	frows, err := s.r.QueryContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: count the failing findings of scans: %w", err)
	}
	defer frows.Close()
	if err := engine.ReadScanFailures(frows, out); err != nil {
		return nil, 0, fmt.Errorf("sqlite: count the failing findings of scans: %w", err)
	}
	return out, total, nil
}

// ScanAccount implements store.Store.
func (s *Store) ScanAccount(ctx context.Context, tenant, id string) (string, string, error) {
	var providerType, providerUID string
	err := s.r.QueryRowContext(ctx, `SELECT provider_type, provider_uid FROM scans WHERE tenant = ?1 AND id = ?2`, tenant, id).
		Scan(&providerType, &providerUID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", store.ErrNotFound
	}
	if err != nil {
		return "", "", fmt.Errorf("sqlite: scan account: %w", err)
	}
	return providerType, providerUID, nil
}

// FindingCounts implements store.Store.
func (s *Store) FindingCounts(ctx context.Context, tenant string, q store.FindingQuery, by []string) ([]store.FindingGroup, error) {
	st, err := engine.FindingCounts(engine.SQLite, tenant, q, by)
	if err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: count findings: %w", err)
	}
	defer rows.Close()
	out, err := engine.ScanGroups(rows, len(by))
	if err != nil {
		return nil, fmt.Errorf("sqlite: count findings: %w", err)
	}
	return out, nil
}

// PreferredBatchSize is the ingestion worker's batch size on SQLite. A
// batch's findings share one inserted_at, and ties in the API's default
// order go by uid, which begins with the check id: a larger batch is a
// longer run of one check's findings, and a common search's walk in that
// order (decision 0016) reads further before it fills a page. At 5,000 a
// batch the common searches at 1M findings were about twice as slow as at
// 2,000, past the 3x bound, for 13 % more records/s on load (decision 0021).
func (s *Store) PreferredBatchSize() int { return 2000 }
