package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/posture-dev/posture/internal/store/storetest"
)

func TestPragmas(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mode string
	var fk, busy int
	for name, d := range map[string]*sql.DB{"writer": s.w, "reader": s.r} {
		if err := d.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("%s: journal_mode %q, %v", name, mode, err)
		}
		if err := d.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
			t.Errorf("%s: foreign_keys %d, %v", name, fk, err)
		}
		if err := d.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil || busy != int(busyTimeout.Milliseconds()) {
			t.Errorf("%s: busy_timeout %d, %v", name, busy, err)
		}
	}
	if s.r == s.w {
		t.Fatal("a file database must have a separate reader pool")
	}
}

// TestReadDuringWrite holds the write lock in an open transaction and checks
// that readers neither wait for it nor see its uncommitted rows.
func TestReadDuringWrite(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.StartRun(ctx, "t", "committed", 1, 1); err != nil {
		t.Fatal(err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO runs (tenant, ingestion_id, attempt, status, started_at, updated_at)
		VALUES ('t', 'uncommitted', 1, 'running', 0, 0)`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.GetRun(ctx, "t", "committed"); err != nil {
		t.Fatalf("read during write: %v", err)
	}
	if _, err := s.GetRun(ctx, "t", "uncommitted"); err == nil {
		t.Fatal("reader saw an uncommitted row")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("reads waited %v for the writer", d)
	}
}

// A database created before incremental auto-vacuum (migration 1 only, as
// every earlier release left it) is switched over by the next Open, keeps
// its data, and then gives deleted space back.
func TestUpgradeSwitchesOnIncrementalVacuum(t *testing.T) {
	ctx := context.Background()
	path, old := migratedTo(t, 1)
	var mode int
	if err := old.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&mode); err != nil || mode != 0 {
		t.Fatalf("the old database's auto_vacuum is %d (%v), want 0 (NONE)", mode, err)
	}
	if _, err := old.ExecContext(ctx, `INSERT INTO blobs (id, tenant, size, chunks, complete, created_at) VALUES ('b', 't', 3, 1, 1, 0);
		INSERT INTO blob_chunks (blob_id, seq, data) VALUES ('b', 0, x'616263')`); err != nil {
		t.Fatal(err)
	}
	old.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open the old database: %v", err)
	}
	defer s.Close()
	if err := s.w.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&mode); err != nil || mode != 2 {
		t.Fatalf("after the upgrade auto_vacuum is %d (%v), want 2 (INCREMENTAL)", mode, err)
	}
	rc, err := s.OpenBlob(ctx, "t", "b")
	if err != nil {
		t.Fatalf("the old database's blob after the upgrade: %v", err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "abc" {
		t.Fatalf("the old blob reads %q after the upgrade", data)
	}
	if n, err := s.SweepIncompleteBlobs(ctx, time.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("sweep after the upgrade: %d, %v; a complete blob is never swept", n, err)
	}
}

// TestUpgradeKeepsBlobsWithoutAccounts opens a database whose complete blob
// was stored before intake recorded a report's accounts: the blob still
// reads back, and says that its accounts were never recorded, so billing
// knows to read the report for them.
func TestUpgradeKeepsBlobsWithoutAccounts(t *testing.T) {
	ctx := context.Background()
	s := upgradedFrom(t, 5, `
INSERT INTO blobs (id, tenant, size, sha256, chunks, complete, created_at, touched_at) VALUES ('old', 't', 2, 'x', 1, 1, 1, 1);
INSERT INTO blob_chunks (blob_id, seq, data) VALUES ('old', 0, X'5b5d');`)
	accounts, recorded, err := s.BlobAccounts(ctx, "t", "old")
	if err != nil || recorded || accounts != nil {
		t.Fatalf("BlobAccounts of a blob stored before the upgrade = %v, %v, %v; want nil, false, nil", accounts, recorded, err)
	}
	rc, err := s.OpenBlob(ctx, "t", "old")
	if err != nil {
		t.Fatalf("OpenBlob: %v", err)
	}
	defer rc.Close()
	if body, err := io.ReadAll(rc); err != nil || string(body) != "[]" {
		t.Fatalf("the old blob reads %q, %v; want []", body, err)
	}
}

// TestUpgradeRebuildsSortIndexes opens a database whose findings were
// written before the time and insertion indexes ended in uid (version 9):
// every index of findings has statistics again, as wide as its columns
// (SQLite plans by them, and a dropped index loses its own), and numbered
// pages, which read those indexes' keys, partition the old findings'
// order, a uid in two scans of one batch included.
func TestUpgradeRebuildsSortIndexes(t *testing.T) {
	ctx := context.Background()
	s := upgradedFrom(t, 9, `
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, severity_id, event_time, raw, inserted_at, updated_at) VALUES
    ('f1', 't', 's-1', 'u-1', 'ing', 1, 30, X'7b7d', 100, 100),
    ('f2', 't', 's-2', 'u-1', 'ing', 1, 30, X'7b7d', 100, 100),
    ('f3', 't', 's-1', 'u-2', 'ing', 2, 10, X'7b7d', 100, 100),
    ('f4', 't', 's-1', 'u-3', 'ing', 2, 20, X'7b7d', 200, 200);`)
	rows, err := s.r.QueryContext(ctx, `SELECT i.name, (SELECT count(*) FROM pragma_index_info(i.name)), coalesce(st.stat, '')
FROM sqlite_schema i LEFT JOIN sqlite_stat1 st ON st.tbl = 'findings' AND st.idx = i.name
WHERE i.type = 'index' AND i.tbl_name = 'findings'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var index, stat string
		var columns int
		if err := rows.Scan(&index, &columns, &stat); err != nil {
			t.Fatal(err)
		}
		if n := len(strings.Fields(stat)); n != columns+1 {
			t.Errorf("index %s of %d columns has statistics %q after the upgrade, want %d numbers", index, columns, stat, columns+1)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// The order of the two findings of u-1 is their ids', so each order is
	// known without reading them back.
	for sort, want := range map[string][]string{
		"-inserted_at": {"f4", "f3", "f2", "f1"},
		"time":         {"f3", "f4", "f1", "f2"},
		"-severity_id": {"f4", "f3", "f2", "f1"},
		"uid":          {"f1", "f2", "f3", "f4"},
	} {
		storetest.CheckNumberedPages(t, s, "t", []string{sort}, want)
	}
}

// TestUpgradeBreaksTiesByInsertionTime opens a database whose check and
// severity indexes ended in uid (version 10): the findings written then
// are listed by check and by severity with their ties in insertion order,
// which is not their uids' here, on numbered pages that read the rebuilt
// indexes' keys.
func TestUpgradeBreaksTiesByInsertionTime(t *testing.T) {
	s := upgradedFrom(t, 10, `
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, check_id, severity_id, event_time, raw, inserted_at, updated_at) VALUES
    ('f1', 't', 's-1', 'u-3', 'ing', 'c-1', 1, 10, X'7b7d', 100, 100),
    ('f2', 't', 's-1', 'u-2', 'ing', 'c-1', 1, 10, X'7b7d', 200, 200),
    ('f3', 't', 's-1', 'u-1', 'ing', 'c-1', 1, 10, X'7b7d', 300, 300),
    ('f4', 't', 's-2', 'u-1', 'ing', 'c-0', 2, 10, X'7b7d', 300, 300);`)
	for sort, want := range map[string][]string{
		"check_id":     {"f4", "f1", "f2", "f3"},
		"-check_id":    {"f3", "f2", "f1", "f4"},
		"severity_id":  {"f1", "f2", "f3", "f4"},
		"-severity_id": {"f4", "f3", "f2", "f1"},
	} {
		storetest.CheckNumberedPages(t, s, "t", []string{sort}, want)
	}
}

// TestUpgradeSummarizesFindingsByScan opens a database from before the
// finding summary by scan (version 11): counts of a scan and of the
// latest view then come from the summary the migration built.
func TestUpgradeSummarizesFindingsByScan(t *testing.T) {
	s := upgradedFrom(t, 11, `
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, severity, event_time, raw, inserted_at, updated_at) VALUES
    ('f1', 't', 's-1', 'u-1', 'ing', 'high', 10, X'7b7d', 100, 100),
    ('f2', 't', 's-1', 'u-2', 'ing', 'high', 10, X'7b7d', 100, 100),
    ('f3', 't', 's-1', 'u-3', 'ing', 'low', 10, X'7b7d', 100, 100),
    ('f4', 't', 's-2', 'u-1', 'ing', 'critical', 10, X'7b7d', 100, 100);
INSERT INTO scans (tenant, id, provider_type, provider_uid, inserted_at, updated_at) VALUES ('t', 's-2', 'aws', '1', 100, 100);
INSERT INTO latest_scans (tenant, provider_type, provider_uid, scan_id, ingestion_id, completed_at) VALUES ('t', 'aws', '1', 's-2', 'ing', 100);`)
	storetest.CheckScanSummary(t, s, "t")
}

// TestUpgradeBoundsTheScans opens a database from before the scans'
// bounds (version 12): the latest view by event time or check reads the
// bounds the migration built.
func TestUpgradeBoundsTheScans(t *testing.T) {
	s := upgradedFrom(t, 12, `
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, check_id, severity, event_time, raw, inserted_at, updated_at) VALUES
    ('f1', 't', 's-1', 'u-1', 'ing', 'c-2', 'high', 300, X'7b7d', 100, 100),
    ('f2', 't', 's-1', 'u-2', 'ing', 'c-1', 'high', 100, X'7b7d', 100, 100),
    ('f3', 't', 's-2', 'u-3', 'ing', 'c-1', 'low', 200, X'7b7d', 100, 100),
    ('f4', 't', 's-3', 'u-4', 'ing', 'c-3', 'critical', 50, X'7b7d', 50, 100);
INSERT INTO scans (tenant, id, provider_type, provider_uid, inserted_at, updated_at) VALUES
    ('t', 's-1', 'aws', '1', 100, 100), ('t', 's-3', 'aws', '2', 50, 100);
INSERT INTO latest_scans (tenant, provider_type, provider_uid, scan_id, ingestion_id, completed_at) VALUES
    ('t', 'aws', '1', 's-1', 'ing', 100), ('t', 'aws', '2', 's-3', 'ing', 100);`)
	storetest.CheckLatestSpans(t, s, "t")
}

// TestUpgradeRemovesDeletedTenantsResidue opens a database from before
// migration 00014, which removes what earlier deletions of a tenant's
// data left (groups counting zero, latest scans whose scan is gone) and
// keeps the rest. Tenant t's groups count its finding, as that release's
// insert triggers did: 00017 rebuilds the summaries from the findings.
func TestUpgradeRemovesDeletedTenantsResidue(t *testing.T) {
	s := upgradedFrom(t, 13, `
INSERT INTO finding_counts (tenant, status_code, provider_type, provider_uid, severity, region, check_id, n) VALUES
    ('gone', 'FAIL', 'aws', '1', 'high', 'eu-west-1', 'c', 0);
INSERT INTO scan_finding_counts (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n) VALUES
    ('gone', 's-1', 'FAIL', 'aws', '1', 'high', 'eu-west-1', 'c', 0);
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, check_id, severity, severity_id, status_code, region, provider_type, provider_uid,
    event_time, raw, inserted_at, updated_at)
    VALUES ('f-1', 't', 's-2', 'u-1', 'ing', 'c', 'high', 4, 'FAIL', 'eu-west-1', 'aws', '2', 100, X'7b7d', 100, 100);
INSERT INTO scans (tenant, id, provider_type, provider_uid, inserted_at, updated_at) VALUES ('t', 's-2', 'aws', '2', 100, 100);
INSERT INTO latest_scans (tenant, provider_type, provider_uid, scan_id, ingestion_id, completed_at) VALUES
    ('gone', 'aws', '1', 's-1', 'ing', 100), ('t', 'aws', '2', 's-2', 'ing', 100);
-- The current state is built from the findings (migration 00018): s-2's.
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, check_id, severity, status_code, region, provider_type, provider_uid, event_time, raw, inserted_at, updated_at)
VALUES ('f', 't', 's-2', 'u', 'ing', 'c', 'high', 'FAIL', 'eu-west-1', 'aws', '2', 100, x'7b7d', 100, 100);`)
	storetest.CheckDeletedTenantsResidueRemoved(t, func(table, tenant string) (n int, err error) {
		err = s.r.QueryRowContext(context.Background(), `SELECT count(*) FROM `+table+` WHERE tenant = ?1`, tenant).Scan(&n)
		return n, err
	})
}

// TestUpgradeNormalisesSeverityAndProviderType opens a database from
// before migration 00017, whose findings hold severities and provider
// types as earlier releases stored them (storetest.CheckNormalisedUpgrade):
// they read back by today's rules, and so do the summaries.
func TestUpgradeNormalisesSeverityAndProviderType(t *testing.T) {
	s := upgradedFrom(t, 16, oldFormRows)
	storetest.CheckNormalisedUpgrade(t, s, summaryDB(s))
}

// TestUpgradeNormalisesProviderTypesAsGoDoes writes scans of the provider
// types storetest.OldProviderTypes lists before migration 00017, which
// builds today's type a character at a time: each reads back as
// ocsf.ProviderType has it.
func TestUpgradeNormalisesProviderTypesAsGoDoes(t *testing.T) {
	ctx := context.Background()
	path, db := migratedTo(t, 16)
	for i, pt := range storetest.OldProviderTypes {
		if _, err := db.ExecContext(ctx, `INSERT INTO scans (tenant, id, provider_type, provider_uid, inserted_at, updated_at) VALUES ('t', ?1, ?2, 'x', 1, 1)`,
			fmt.Sprintf("pt-%d", i), pt); err != nil {
			t.Fatalf("write the old scan of type %q: %v", pt, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open the old database: %v", err)
	}
	defer s.Close()
	storetest.CheckProviderTypesNormalised(t, s)
}

// oldFormRows are storetest.CheckNormalisedUpgrade's rows as SQLite held
// them: the store, not a trigger, counted new findings into the summaries
// and the scans' bounds, so they are written here as it would have.
const oldFormRows = `
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, check_id, title, severity, severity_id, status_code, region,
    provider_type, provider_uid, event_time, raw, inserted_at, updated_at) VALUES
    ('f-1', 't', 's-1', 'u-1', 'ing-1', 'c-1', 'Old finding u-1', 'critical', 1, 'FAIL', 'eu-west-1', 'aws', '1', 10, X'7b7d', 100, 100),
    ('f-2', 't', 's-1', 'u-2', 'ing-1', 'c-2', 'Old finding u-2', 'informational', 5, 'FAIL', 'eu-west-1', 'aws', '1', 20, X'7b7d', 100, 100),
    ('f-3', 't', 's-1', 'u-3', 'ing-1', 'c-3', 'Old finding u-3', 'severe', 4, 'FAIL', 'eu-west-1', 'aws', '1', 30, X'7b7d', 100, 100),
    ('f-4', 't', 's-1', 'u-4', 'ing-1', 'c-4', 'Old finding u-4', 'high', 4, 'FAIL', 'eu-west-1', 'aws', '1', 40, X'7b7d', 100, 100),
    ('f-5', 't', 's-2', 'u-5', 'ing-1', 'c-5', 'Old finding u-5', 'medium', 3, 'FAIL', 'eu-west-1', 'google cloud', 'p', 50, X'7b7d', 100, 100),
    ('f-6', 't', 's-3', 'u-6', 'ing-2', 'c-6', 'Old finding u-6', 'low', 2, 'FAIL', 'eu-west-1', 'google-cloud', 'p', 60, X'7b7d', 200, 200),
    ('f-7', 't', 's-4', 'u-7', 'ing-1', 'c-7', 'Old finding u-7', 'unknown', 3, 'FAIL', 'eu-west-1', 'k8s_cluster', 'c', 70, X'7b7d', 100, 100);
INSERT INTO scans (tenant, id, provider_type, provider_uid, ingestion_id, inserted_at, updated_at) VALUES
    ('t', 's-1', 'aws', '1', 'ing-1', 100, 100), ('t', 's-2', 'google cloud', 'p', 'ing-1', 100, 100),
    ('t', 's-3', 'google-cloud', 'p', 'ing-2', 200, 200), ('t', 's-4', 'k8s_cluster', 'c', 'ing-1', 100, 100);
INSERT INTO latest_scans (tenant, provider_type, provider_uid, scan_id, ingestion_id, completed_at) VALUES
    ('t', 'aws', '1', 's-1', 'ing-1', 150), ('t', 'google cloud', 'p', 's-2', 'ing-1', 150),
    ('t', 'google-cloud', 'p', 's-3', 'ing-2', 250), ('t', 'k8s_cluster', 'c', 's-4', 'ing-1', 150);
INSERT INTO finding_counts (tenant, status_code, provider_type, provider_uid, severity, region, check_id, n)
SELECT tenant, status_code, provider_type, provider_uid, severity, region, check_id, count(*)
FROM findings GROUP BY tenant, status_code, provider_type, provider_uid, severity, region, check_id;
INSERT INTO scan_finding_counts (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n)
SELECT tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, count(*)
FROM findings GROUP BY tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id;
INSERT INTO scan_bounds (tenant, scan_id, first_inserted, last_inserted, first_event, last_event)
SELECT tenant, scan_id, min(inserted_at), max(inserted_at), min(event_time), max(event_time)
FROM findings GROUP BY tenant, scan_id;`

// upgradedFrom opens the store on a database file migrated up to
// version, as a store of that release left it, with the rows oldRows
// (SQL) wrote then.
func upgradedFrom(t *testing.T, version int64, oldRows string) *Store {
	t.Helper()
	ctx := context.Background()
	path, db := migratedTo(t, version)
	if _, err := db.ExecContext(ctx, oldRows); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open the old database: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// migratedTo returns a new database file migrated up to version, as a
// store of that release left it, open in WAL mode (as the store opens it)
// to write its old rows through; the caller closes it before opening the
// store.
func migratedTo(t *testing.T, version int64) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
	return path, db
}

// DeleteTenantData leaves no row of the tenant in any table, the derived
// ones (summaries, latest scans, scan bounds) included.
func TestDeleteTenantDataLeavesNoRows(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "d.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckDeleteTenantDataLeavesNoRows(t, s, func(tenant string) (map[string]int, error) {
		ctx := context.Background()
		rows, err := s.r.QueryContext(ctx, `SELECT m.name FROM sqlite_master AS m, pragma_table_info(m.name) AS c
WHERE m.type = 'table' AND c.name = 'tenant'`)
		if err != nil {
			return nil, err
		}
		var tables []string
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				rows.Close()
				return nil, err
			}
			tables = append(tables, name)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		counts := map[string]int{}
		for _, table := range tables {
			var n int
			if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM "`+table+`" WHERE tenant = ?1`, tenant).Scan(&n); err != nil {
				return nil, err
			}
			counts[table] = n
		}
		return counts, nil
	})
}
