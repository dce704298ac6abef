package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// stagingTable receives a batch's findings by COPY, the fastest way into
// PostgreSQL, from where one INSERT ... SELECT upserts them (COPY itself
// cannot resolve conflicts). It is a per-connection temporary table, created
// once per connection and emptied by every commit, so batches pay neither
// catalog churn nor WAL for it.
const stagingTable = "posture_findings_staging"

// stagingDDL creates the staging table. raw is compressed here, once, with
// the method findings.raw uses (a compressed value is copied as is), and the
// table's high toast target keeps it inline so staging never writes a TOAST
// table of its own.
func stagingDDL(lz4 bool) string {
	comp := ""
	if lz4 {
		comp = " COMPRESSION lz4"
	}
	return `
CREATE TEMPORARY TABLE IF NOT EXISTS ` + stagingTable + ` (
    id uuid, scan_id text COLLATE "C", uid text COLLATE "C", check_id text, title text, severity text,
    severity_id integer, status_code text, status text, region text, provider_type text, provider_uid text,
    resource_uid text, event_time timestamptz, raw bytea` + comp + `
) WITH (toast_tuple_target = 8160) ON COMMIT DELETE ROWS`
}

// findingFields are the columns a finding brings itself, in the order
// encodeFinding writes them.
const findingFields = `id, scan_id, uid, check_id, title, severity, severity_id,
    status_code, status, region, provider_type, provider_uid, resource_uid, event_time, raw`

const findingFieldCount = 15

// copyStaging fills the staging table with a batch's findings.
const copyStaging = `COPY ` + stagingTable + ` (` + findingFields + `) FROM STDIN (FORMAT binary)`

// copyFindings COPYs a batch's findings straight into findings; the row's
// own fields are followed by what the run adds.
const copyFindings = `COPY findings (` + findingFields + `, tenant, ingestion_id, inserted_at, updated_at)
FROM STDIN (FORMAT binary)`

// encodeFinding starts a row with the finding's own fields (findingFields),
// announcing more fields after them, which the caller then writes.
func encodeFinding(w *binaryRow, id [16]byte, f *store.Finding, more int) {
	w.fields(findingFieldCount + more)
	w.uuid(id)
	w.text(f.ScanID)
	w.text(f.UID)
	w.text(f.CheckID)
	w.text(f.Title)
	w.text(f.Severity)
	w.int4(int32(f.SeverityID))
	w.text(f.StatusCode)
	w.text(f.Status)
	w.text(f.Region)
	w.text(f.ProviderType)
	w.text(f.ProviderUID)
	w.text(f.ResourceUID)
	w.timestamptz(f.Time)
	w.bytea(f.Raw)
}

// The staging rows are already sorted by id, and ORDER BY keeps that order
// for the inserts, so concurrent overlapping batches lock rows in the same
// order instead of deadlocking.
const upsertFromStaging = `
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, check_id, title, severity, severity_id,
    status_code, status, region, provider_type, provider_uid, resource_uid, event_time, raw, inserted_at, updated_at)
SELECT id, $1, scan_id, uid, $2, check_id, title, severity, severity_id,
    status_code, status, region, provider_type, provider_uid, resource_uid, event_time, raw, $3, $3
FROM ` + stagingTable + `
ORDER BY id
ON CONFLICT (id) DO UPDATE SET
    -- The right-hand sides see the stored row: the previous owner is kept
    -- for FinishRun to restore should this ingestion fail.
    prev_ingestion_id = CASE WHEN findings.ingestion_id = excluded.ingestion_id
        THEN findings.prev_ingestion_id ELSE findings.ingestion_id END,
    ingestion_id = excluded.ingestion_id, check_id = excluded.check_id, title = excluded.title,
    severity = excluded.severity, severity_id = excluded.severity_id, status_code = excluded.status_code,
    status = excluded.status, region = excluded.region, provider_type = excluded.provider_type,
    provider_uid = excluded.provider_uid, resource_uid = excluded.resource_uid,
    event_time = excluded.event_time, updated_at = excluded.updated_at,
    -- Keeping the stored value when equal spares re-ingestion a new TOAST
    -- copy of every record (and the dead one it leaves).
    raw = CASE WHEN findings.raw = excluded.raw THEN findings.raw ELSE excluded.raw END
-- A row the upsert inserted has no xmax; one it rewrote has the upsert's
-- own. The inserted ones are counted into the summaries (addNew).
RETURNING id, xmax = 0`

// Scans come a few per batch; arrays keep them to one round trip.
const upsertScans = `
INSERT INTO scans (tenant, id, provider_type, provider_uid, scan_trigger, ingestion_id, inserted_at, updated_at)
SELECT $1, id, provider_type, provider_uid, scan_trigger, $2, $3, $3
FROM unnest($4::text[], $5::text[], $6::text[], $7::text[]) AS t(id, provider_type, provider_uid, scan_trigger)
ON CONFLICT (tenant, id) DO UPDATE SET
    scan_trigger = excluded.scan_trigger, ingestion_id = excluded.ingestion_id, updated_at = excluded.updated_at
-- A scan covers one account. Two ingestions that name one new scan id for
-- different accounts both passed the worker's check: the second waits on
-- the first's row here, and then updates nothing.
WHERE scans.provider_type = excluded.provider_type AND scans.provider_uid = excluded.provider_uid
RETURNING id`

// recordScans notes the scans an ingestion wrote: what its merge into the
// current state reads (engine.CurrentMerge).
const recordScans = `
INSERT INTO ingestion_scans (tenant, ingestion_id, scan_id) SELECT $1, $2, unnest($3::text[])
ON CONFLICT DO NOTHING`

var errorColumns = []string{"tenant", "ingestion_id", "attempt", "record_index", "finding_uid", "code", "detail", "pointer", "value"}

// PreferredBatchSize is the ingestion worker's batch size on PostgreSQL:
// 2,000 findings (about 4 MB of records) per transaction cost the server
// measurably less per finding than 1,000, and the worker's peak RSS stays
// under 100 MiB for a 1 GiB report (docs/performance.md). SQLite keeps the
// worker's default, since its page cache lives in the worker's memory.
func (s *Store) PreferredBatchSize() int { return 2000 }

// WriteBatch implements store.Store.
func (s *Store) WriteBatch(ctx context.Context, tenant, ingestionID string, attempt int, in store.Batch) error {
	now := engine.Now()
	b, err := engine.PrepareBatch(tenant, ingestionID, in, now)
	if err != nil {
		return err
	}
	ids, err := findingIDs(b.Findings)
	if err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: write batch: %w", err)
	}
	defer conn.Release()
	if len(b.Findings) > 0 {
		if err := s.ensureStaging(ctx, conn); err != nil {
			return err
		}
	}
	upsert := false
	for deadlocks := 0; ; {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			return writeBatch(ctx, tx, tenant, ingestionID, attempt, now, b, ids, upsert, s.leftOut)
		})
		if errors.Is(err, errCopyMetStoredRow) && !upsert {
			// The transaction wrote nothing before the COPY that failed; do
			// it all again, this time upserting.
			upsert = true
			continue
		}
		if isDeadlock(err) && deadlocks < maxDeadlockRetries {
			// An upsert updates the finding summary twice (for the rows
			// it inserted, then for those it rewrote), each in key order;
			// two batches rewriting the same groups at once can lock
			// them in opposite order. The one PostgreSQL aborted wrote
			// nothing: run it again.
			deadlocks++
			continue
		}
		return err
	}
}

// writeBatch is one attempt at a batch's transaction. Each round trip in it
// is one the worker's pipeline waits for, so the run's check and the
// findings' existence probe share one.
func writeBatch(ctx context.Context, tx pgx.Tx, tenant, ingestionID string, attempt int, now time.Time, b engine.Batch, ids [][16]byte, upsert bool, leftOut map[string]bool) error {
	// FOR KEY SHARE lets batches of one attempt run side by side, and lets
	// UpdateRun record progress while they do (a plain UPDATE of non-key
	// columns does not conflict with it), while StartRun of a newer attempt
	// and FinishRun, which lock the row FOR UPDATE, wait for them (and
	// batches after those fail). A FOR SHARE lock made each progress update
	// wait for the batch in flight, stalling the parse behind it.
	var probe *[16]byte
	if len(ids) > 0 && !upsert {
		probe = &ids[0]
	}
	var (
		stored   int
		finished *time.Time
		exists   bool
		rules    bool
	)
	// Whether the tenant has mute rules rides along, so that a tenant
	// without them pays no round trip for marking the batch.
	err := tx.QueryRow(ctx, `
SELECT attempt, finished_at, $3::uuid IS NOT NULL AND EXISTS (SELECT 1 FROM findings WHERE id = $3),
    EXISTS (SELECT 1 FROM mute_rules WHERE tenant = $1)
FROM runs WHERE tenant = $1 AND ingestion_id = $2 FOR KEY SHARE`,
		tenant, ingestionID, probe).Scan(&stored, &finished, &exists, &rules)
	if isNoRows(err) {
		return store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("postgres: write batch: %w", err)
	}
	if stored != attempt || finished != nil {
		return store.ErrStaleAttempt
	}
	if len(b.Findings) > 0 {
		if err := writeFindings(ctx, tx, tenant, ingestionID, now, b.Findings, ids, upsert || exists, leftOut); err != nil {
			return err
		}
		if rules {
			if err := engine.MarkFindings(ctx, muteTx{tx}, engine.Postgres, tenant, b.Findings, now); err != nil {
				return fmt.Errorf("postgres: %w", err)
			}
		}
	}
	if len(b.Scans) > 0 {
		n := len(b.Scans)
		scanIDs, types, uids, triggers := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		for i, sc := range b.Scans {
			scanIDs[i], types[i], uids[i], triggers[i] = sc.ID, sc.ProviderType, sc.ProviderUID, sc.Trigger
		}
		rows, err := tx.Query(ctx, upsertScans, tenant, ingestionID, now, scanIDs, types, uids, triggers)
		if err != nil {
			return fmt.Errorf("postgres: write scans: %w", err)
		}
		written := map[string]bool{}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("postgres: write scans: %w", err)
			}
			written[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("postgres: write scans: %w", err)
		}
		for _, sc := range b.Scans {
			if !written[sc.ID] {
				return fmt.Errorf("postgres: write scan %q of account %s/%s: %w", sc.ID, sc.ProviderType, sc.ProviderUID, store.ErrScanAccount)
			}
		}
		if _, err := tx.Exec(ctx, recordScans, tenant, ingestionID, scanIDs); err != nil {
			return fmt.Errorf("postgres: record the ingestion's scans: %w", err)
		}
	}
	if len(b.Errors) > 0 {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"ingestion_errors"}, errorColumns,
			pgx.CopyFromSlice(len(b.Errors), func(i int) ([]any, error) {
				e := b.Errors[i]
				return []any{tenant, ingestionID, attempt, e.RecordIndex, e.FindingUID, e.Code, e.Detail, e.Pointer, e.Value}, nil
			}))
		if err != nil {
			return fmt.Errorf("postgres: write ingestion errors: %w", err)
		}
	}
	return nil
}

// ensureStaging creates the staging table on conn unless it already did.
// It runs outside the batch transaction: a rollback would otherwise undo
// the CREATE while the connection still remembered it.
func (s *Store) ensureStaging(ctx context.Context, conn *pgxpool.Conn) error {
	data := conn.Conn().PgConn().CustomData()
	if data[stagingTable] == true {
		return nil
	}
	if _, err := conn.Exec(ctx, stagingDDL(s.lz4)); err != nil {
		return fmt.Errorf("postgres: create staging table: %w", err)
	}
	data[stagingTable] = true
	return nil
}

func findingIDs(fs []store.Finding) ([][16]byte, error) {
	ids := make([][16]byte, len(fs))
	for i := range fs {
		id, err := uuid.Parse(fs[i].ID)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

// maxDeadlockRetries bounds how often WriteBatch (or FinishRun) runs its transaction again after
// PostgreSQL broke a deadlock by aborting it.
const maxDeadlockRetries = 5

// errCopyMetStoredRow is a COPY that stopped on a finding already stored;
// its transaction is aborted, and the batch must be upserted instead.
var errCopyMetStoredRow = errors.New("postgres: copy findings met a stored row")

// writeFindings stores a batch. New findings, the common case (the first
// ingestion of a report), are COPYed straight into the table. A batch whose
// first row (in the batch's fixed order) is already stored, as in a re-run or
// a re-upload, is upserted. Should the COPY meet a stored row after all (a
// report that grew since it was last ingested, or another ingestion of the
// same report racing this one), it stops there on the primary key and
// writeFindings returns errCopyMetStoredRow: WriteBatch then runs the whole
// transaction again, upserting. (A savepoint around the COPY would save that
// repetition in a rare case and cost every batch a subtransaction and two
// round trips.) Probing one id by equality keeps the probe an index lookup
// whatever the planner believes about a table that is just being filled;
// probing every id cost an index lookup per row.
func writeFindings(ctx context.Context, tx pgx.Tx, tenant, ingestionID string, now time.Time, fs []store.Finding, ids [][16]byte, upsert bool, leftOut map[string]bool) error {
	if upsert {
		added, err := upsertFindings(ctx, tx, tenant, ingestionID, now, fs, ids)
		if err != nil {
			return err
		}
		return addNew(ctx, tx, tenant, added, leftOut)
	}
	_, err := tx.Conn().PgConn().CopyFrom(ctx, newBinaryCopy(len(fs), func(w *binaryRow, i int) {
		encodeFinding(w, ids[i], &fs[i], 4)
		w.text(tenant)
		w.text(ingestionID)
		w.timestamptz(now)
		w.timestamptz(now)
	}), copyFindings)
	switch {
	case err == nil:
		return addNew(ctx, tx, tenant, fs, leftOut)
	case isUniqueViolation(err):
		return fmt.Errorf("%w: %v", errCopyMetStoredRow, err)
	}
	return fmt.Errorf("postgres: copy findings: %w", err)
}

// upsertFindings stages the batch by COPY and upserts it from there. It
// returns the findings it inserted (rather than rewrote).
func upsertFindings(ctx context.Context, tx pgx.Tx, tenant, ingestionID string, now time.Time, fs []store.Finding, ids [][16]byte) ([]store.Finding, error) {
	_, err := tx.Conn().PgConn().CopyFrom(ctx, newBinaryCopy(len(fs), func(w *binaryRow, i int) {
		encodeFinding(w, ids[i], &fs[i], 0)
	}), copyStaging)
	if err != nil {
		return nil, fmt.Errorf("postgres: stage findings: %w", err)
	}
	rows, err := tx.Query(ctx, upsertFromStaging, tenant, ingestionID, now)
	if err != nil {
		return nil, fmt.Errorf("postgres: upsert findings: %w", err)
	}
	inserted := map[[16]byte]bool{}
	var id [16]byte
	var isNew bool
	_, err = pgx.ForEachRow(rows, []any{&id, &isNew}, func() error {
		if isNew {
			inserted[id] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: upsert findings: %w", err)
	}
	var added []store.Finding
	for i := range fs {
		if inserted[ids[i]] {
			added = append(added, fs[i])
		}
	}
	return added, nil
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

func scanFinding(row pgx.Row) (store.Finding, error) {
	var (
		f  store.Finding
		id uuid.UUID
	)
	err := row.Scan(&id, &f.UID, &f.ScanID, &f.IngestionID, &f.CheckID, &f.Title, &f.Severity, &f.SeverityID,
		&f.StatusCode, &f.Status, &f.Region, &f.ProviderType, &f.ProviderUID, &f.ResourceUID, &f.Time, &f.Raw,
		&f.InsertedAt, &f.UpdatedAt)
	if err != nil {
		return store.Finding{}, err
	}
	f.ID = id.String()
	if f.Raw == nil {
		f.Raw = []byte{}
	}
	f.Time, f.InsertedAt, f.UpdatedAt = utc(f.Time), utc(f.InsertedAt), utc(f.UpdatedAt)
	return f, nil
}

// ListFindings implements store.Store.
func (s *Store) ListFindings(ctx context.Context, tenant string, q store.FindingQuery) ([]store.Finding, int, error) {
	count, page, err := engine.FindingList(engine.Postgres, tenant, q)
	if err != nil {
		return nil, 0, err
	}
	rows, err := s.pool.Query(ctx, page.SQL, page.Args...)
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: list findings: %w", err)
	}
	defer rows.Close()
	out := []store.Finding{}
	for rows.Next() {
		f, err := scanFinding(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("postgres: list findings: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("postgres: list findings: %w", err)
	}
	total, known := engine.ShortPageCount(q, len(out))
	if !known {
		if err := s.pool.QueryRow(ctx, count.SQL, count.Args...).Scan(&total); err != nil {
			return nil, 0, fmt.Errorf("postgres: count findings: %w", err)
		}
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
		id, err := uuid.Parse(out[i].ID)
		if err != nil {
			return fmt.Errorf("postgres: annotate findings: %w", err)
		}
		args = append(args, id)
		at[id.String()] = &out[i]
	}
	rows, err := s.pool.Query(ctx, engine.Annotations(engine.Postgres, len(out)), args...)
	if err != nil {
		return fmt.Errorf("postgres: annotate findings: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var first *time.Time
		var delta string
		if err := rows.Scan(&id, &first, &delta); err != nil {
			return fmt.Errorf("postgres: annotate findings: %w", err)
		}
		if f := at[id.String()]; f != nil {
			if first != nil {
				t := first.UTC()
				f.FirstSeenAt = &t
			}
			f.Delta = engine.AnnotatedDelta(q, delta)
		}
	}
	return rows.Err()
}

// GetFinding implements store.Store.
func (s *Store) GetFinding(ctx context.Context, tenant, id string) (store.Finding, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return store.Finding{}, store.ErrNotFound
	}
	f, err := scanFinding(s.pool.QueryRow(ctx,
		`SELECT `+engine.FindingColumns+` FROM findings WHERE id = $1 AND tenant = $2`, uid, tenant))
	if isNoRows(err) || isInvalidText(err) {
		return store.Finding{}, store.ErrNotFound
	}
	if err != nil {
		return store.Finding{}, fmt.Errorf("postgres: get finding: %w", err)
	}
	one := []store.Finding{f}
	if err := s.readMarks(ctx, tenant, one); err != nil {
		return store.Finding{}, err
	}
	return one[0], nil
}

// ListScans implements store.Store.
func (s *Store) ListScans(ctx context.Context, tenant string, q store.ScanQuery) ([]store.Scan, int, error) {
	a := engine.NewArgs(engine.Postgres)
	where := engine.ScanWhere(a, tenant, q)
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM scans s WHERE `+where, a.Vals...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("postgres: count scans: %w", err)
	}
	limit, offset := engine.Limit(q.Page)
	rows, err := s.pool.Query(ctx, `
SELECT s.id, s.provider_type, s.provider_uid, s.scan_trigger, s.ingestion_id, s.inserted_at, s.updated_at,
    (SELECT count(*) FROM findings f WHERE f.tenant = s.tenant AND f.scan_id = s.id), b.first_event
FROM scans s LEFT JOIN `+engine.ScanBoundsTable+` b ON b.tenant = s.tenant AND b.scan_id = s.id
WHERE `+where+`
ORDER BY s.inserted_at DESC, s.id
LIMIT `+a.Add(limit)+` OFFSET `+a.Add(offset), a.Vals...)
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: list scans: %w", err)
	}
	out := []store.Scan{}
	ids := []string{}
	var sc store.Scan
	var scanned *time.Time
	_, err = pgx.ForEachRow(rows, []any{&sc.ID, &sc.ProviderType, &sc.ProviderUID, &sc.Trigger, &sc.IngestionID,
		&sc.InsertedAt, &sc.UpdatedAt, &sc.FindingCount, &scanned}, func() error {
		c := sc
		c.InsertedAt, c.UpdatedAt = utc(c.InsertedAt), utc(c.UpdatedAt)
		if scanned != nil {
			c.ScannedAt = utc(*scanned)
		}
		out = append(out, c)
		ids = append(ids, c.ID)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: list scans: %w", err)
	}
	if len(ids) == 0 {
		return out, total, nil
	}
	st := engine.ScanFailures(engine.Postgres, tenant, ids)
	frows, err := s.pool.Query(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: count the failing findings of scans: %w", err)
	}
	defer frows.Close()
	if err := engine.ReadScanFailures(frows, out); err != nil {
		return nil, 0, fmt.Errorf("postgres: count the failing findings of scans: %w", err)
	}
	return out, total, nil
}

// ScanAccount implements store.Store.
func (s *Store) ScanAccount(ctx context.Context, tenant, id string) (string, string, error) {
	var providerType, providerUID string
	err := s.pool.QueryRow(ctx, `SELECT provider_type, provider_uid FROM scans WHERE tenant = $1 AND id = $2`, tenant, id).
		Scan(&providerType, &providerUID)
	if isNoRows(err) {
		return "", "", store.ErrNotFound
	}
	if err != nil {
		return "", "", fmt.Errorf("postgres: scan account: %w", err)
	}
	return providerType, providerUID, nil
}

// FindingCounts implements store.Store.
func (s *Store) FindingCounts(ctx context.Context, tenant string, q store.FindingQuery, by []string) ([]store.FindingGroup, error) {
	st, err := engine.FindingCounts(engine.Postgres, tenant, q, by)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: count findings: %w", err)
	}
	defer rows.Close()
	out, err := engine.ScanGroups(rows, len(by))
	if err != nil {
		return nil, fmt.Errorf("postgres: count findings: %w", err)
	}
	return out, nil
}
