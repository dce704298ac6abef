package postgres

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/pgtest"
	"github.com/posture-dev/posture/internal/store/storetest"
)

// TestUpgradeIndexesSearchAndLatest opens a database written before the
// search index and the latest scans existed: the upgrade builds the
// current state from the findings of runs that did not fail or still run
// (per account and check, one here: the run of the same event time
// inserted last), and searches read the new index.
func TestUpgradeIndexesSearchAndLatest(t *testing.T) {
	ctx := context.Background()
	s := upgradedFrom(t, 5, `
INSERT INTO runs (tenant, ingestion_id, attempt, status, started_at, updated_at, finished_at) VALUES
    ('t', 'ing-a', 1, 'succeeded', now(), now(), '2026-01-01'),
    ('t', 'ing-b', 1, 'succeeded', now(), now(), '2026-01-02'),
    ('t', 'ing-c', 1, 'failed', now(), now(), '2026-01-03'),
    ('t', 'ing-d', 1, 'running', now(), now(), NULL);
INSERT INTO scans (tenant, id, provider_type, provider_uid, ingestion_id, inserted_at, updated_at) VALUES
    ('t', 's-a', 'aws', '111', 'ing-a', '2026-01-01', now()),
    ('t', 's-b', 'aws', '111', 'ing-b', '2026-01-02', now()),
    ('t', 's-c', 'aws', '111', 'ing-c', '2026-01-03', now()),
    ('t', 's-d', 'aws', '111', 'ing-d', '2026-01-04', now()),
    ('t', 's-g', 'gcp', 'proj', 'ing-a', '2026-01-01', now());
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, title, provider_type, provider_uid, event_time, raw, inserted_at, updated_at)
SELECT gen_random_uuid(), 't', id, 'uid-' || id, ingestion_id, 'Old title in ' || id, provider_type, provider_uid, '2026-01-01', '\x7b7d', inserted_at, inserted_at FROM scans;`)
	scans := func(q store.FindingQuery) []string {
		t.Helper()
		q.Sort, q.Page = []string{"uid"}, store.Page{Size: 10}
		found, _, err := s.ListFindings(ctx, "t", q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range found {
			out = append(out, f.ScanID)
		}
		return out
	}
	if got := scans(store.FindingQuery{Latest: true}); !slices.Equal(got, []string{"s-b", "s-g"}) {
		t.Errorf("latest scans after the upgrade: %v, want [s-b s-g]", got)
	}
	if got := scans(store.FindingQuery{Search: "TITLE IN S-C"}); !slices.Equal(got, []string{"s-c"}) {
		t.Errorf("search after the upgrade: %v, want [s-c]", got)
	}
}

// TestUpgradeKeepsBlobsWithoutAccounts opens a database whose complete blob
// was stored before intake recorded a report's accounts: the blob still
// reads back, and says that its accounts were never recorded, so billing
// knows to read the report for them.
func TestUpgradeKeepsBlobsWithoutAccounts(t *testing.T) {
	ctx := context.Background()
	const id = "6f1c5d2e-8a4b-4c3d-9e2f-0a1b2c3d4e5f"
	s := upgradedFrom(t, 6, `
INSERT INTO blobs (id, tenant, size, sha256, chunks, complete, created_at, touched_at)
    VALUES ('`+id+`', 't', 2, 'x', 1, true, now(), now());
INSERT INTO blob_chunks (blob_id, seq, data) VALUES ('`+id+`', 0, '\x5b5d');`)
	accounts, recorded, err := s.BlobAccounts(ctx, "t", id)
	if err != nil || recorded || accounts != nil {
		t.Fatalf("BlobAccounts of a blob stored before the upgrade = %v, %v, %v; want nil, false, nil", accounts, recorded, err)
	}
	rc, err := s.OpenBlob(ctx, "t", id)
	if err != nil {
		t.Fatalf("OpenBlob: %v", err)
	}
	defer rc.Close()
	if body, err := io.ReadAll(rc); err != nil || string(body) != "[]" {
		t.Fatalf("the old blob reads %q, %v; want []", body, err)
	}
}

// TestUpgradeRebuildsSortIndexes opens a database whose findings were
// written before the time and insertion indexes ended in uid and the scan
// index carried the insertion time (version 10): numbered pages, which
// read those indexes' keys, partition the old findings' order, a uid in
// two scans of one batch included, and a scan's findings read back.
func TestUpgradeRebuildsSortIndexes(t *testing.T) {
	ctx := context.Background()
	s := upgradedFrom(t, 10, `
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, severity_id, event_time, raw, inserted_at, updated_at) VALUES
    ('00000000-0000-0000-0000-000000000001', 't', 's-1', 'u-1', 'ing', 1, '2026-01-03', '\x7b7d', '2026-02-01', now()),
    ('00000000-0000-0000-0000-000000000002', 't', 's-2', 'u-1', 'ing', 1, '2026-01-03', '\x7b7d', '2026-02-01', now()),
    ('00000000-0000-0000-0000-000000000003', 't', 's-1', 'u-2', 'ing', 2, '2026-01-01', '\x7b7d', '2026-02-01', now()),
    ('00000000-0000-0000-0000-000000000004', 't', 's-1', 'u-3', 'ing', 2, '2026-01-02', '\x7b7d', '2026-02-02', now());`)
	// The order of the two findings of u-1 is their ids', so each order is
	// known without reading them back.
	for sort, want := range map[string][]int{
		"-inserted_at": {4, 3, 2, 1},
		"time":         {3, 4, 1, 2},
		"-severity_id": {4, 3, 2, 1},
		"uid":          {1, 2, 3, 4},
	} {
		storetest.CheckNumberedPages(t, s, "t", []string{sort}, oldFindingIDs(want...))
	}
	scan, _, err := s.ListFindings(ctx, "t", store.FindingQuery{ScanID: "s-1", Sort: []string{"-inserted_at"}})
	if err != nil || len(scan) != 3 || scan[0].ID != oldFindingIDs(4)[0] {
		t.Fatalf("scan s-1 after the upgrade, newest first: %d findings, %v", len(scan), err)
	}
}

// TestUpgradeBreaksTiesByInsertionTime opens a database whose check and
// severity indexes ended in uid (version 12): the findings written then
// are listed by check and by severity with their ties in insertion order,
// which is not their uids' here, on numbered pages that read the rebuilt
// indexes' keys.
func TestUpgradeBreaksTiesByInsertionTime(t *testing.T) {
	s := upgradedFrom(t, 12, `
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, check_id, severity_id, event_time, raw, inserted_at, updated_at) VALUES
    ('00000000-0000-0000-0000-000000000001', 't', 's-1', 'u-3', 'ing', 'c-1', 1, '2026-01-01', '\x7b7d', '2026-02-01', now()),
    ('00000000-0000-0000-0000-000000000002', 't', 's-1', 'u-2', 'ing', 'c-1', 1, '2026-01-01', '\x7b7d', '2026-02-02', now()),
    ('00000000-0000-0000-0000-000000000003', 't', 's-1', 'u-1', 'ing', 'c-1', 1, '2026-01-01', '\x7b7d', '2026-02-03', now()),
    ('00000000-0000-0000-0000-000000000004', 't', 's-2', 'u-1', 'ing', 'c-0', 2, '2026-01-01', '\x7b7d', '2026-02-03', now());`)
	for sort, want := range map[string][]int{
		"check_id":     {4, 1, 2, 3},
		"-check_id":    {3, 2, 1, 4},
		"severity_id":  {1, 2, 3, 4},
		"-severity_id": {4, 3, 2, 1},
	} {
		storetest.CheckNumberedPages(t, s, "t", []string{sort}, oldFindingIDs(want...))
	}
}

// TestUpgradeSummarizesFindingsByScan opens a database from before the
// finding summary by scan (version 13): counts of a scan and of the
// latest view then come from the summary the migration built.
func TestUpgradeSummarizesFindingsByScan(t *testing.T) {
	s := upgradedFrom(t, 13, `
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, severity, event_time, raw, inserted_at, updated_at) VALUES
    ('00000000-0000-0000-0000-000000000001', 't', 's-1', 'u-1', 'ing', 'high', '2026-01-01', '\x7b7d', now(), now()),
    ('00000000-0000-0000-0000-000000000002', 't', 's-1', 'u-2', 'ing', 'high', '2026-01-01', '\x7b7d', now(), now()),
    ('00000000-0000-0000-0000-000000000003', 't', 's-1', 'u-3', 'ing', 'low', '2026-01-01', '\x7b7d', now(), now()),
    ('00000000-0000-0000-0000-000000000004', 't', 's-2', 'u-1', 'ing', 'critical', '2026-01-01', '\x7b7d', now(), now());
INSERT INTO scans (tenant, id, provider_type, provider_uid, inserted_at, updated_at) VALUES ('t', 's-2', 'aws', '1', now(), now());
INSERT INTO latest_scans (tenant, provider_type, provider_uid, scan_id, ingestion_id, completed_at) VALUES ('t', 'aws', '1', 's-2', 'ing', now());`)
	storetest.CheckScanSummary(t, s, "t")
}

// The latest view by event time or check reads the latest scans' bounds
// (migration 00015): the upgrade bounds every scan's findings already
// written.
func TestUpgradeBoundsTheScans(t *testing.T) {
	s := upgradedFrom(t, 14, `
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, check_id, severity, event_time, raw, inserted_at, updated_at) VALUES
    ('00000000-0000-0000-0000-000000000001', 't', 's-1', 'u-1', 'ing', 'c-2', 'high', '2026-01-03', '\x7b7d', now(), now()),
    ('00000000-0000-0000-0000-000000000002', 't', 's-1', 'u-2', 'ing', 'c-1', 'high', '2026-01-01', '\x7b7d', now(), now()),
    ('00000000-0000-0000-0000-000000000003', 't', 's-2', 'u-3', 'ing', 'c-1', 'low', '2026-01-02', '\x7b7d', now(), now()),
    ('00000000-0000-0000-0000-000000000004', 't', 's-3', 'u-4', 'ing', 'c-3', 'critical', '2025-06-01', '\x7b7d', now() - interval '1 day', now());
INSERT INTO scans (tenant, id, provider_type, provider_uid, inserted_at, updated_at) VALUES
    ('t', 's-1', 'aws', '1', now(), now()), ('t', 's-3', 'aws', '2', now(), now());
INSERT INTO latest_scans (tenant, provider_type, provider_uid, scan_id, ingestion_id, completed_at) VALUES
    ('t', 'aws', '1', 's-1', 'ing', now()), ('t', 'aws', '2', 's-3', 'ing', now());`)
	storetest.CheckLatestSpans(t, s, "t")
}

// Migration 00016 removes what earlier deletions of a tenant's data left:
// groups counting zero and latest scans whose scan is gone, and keeps the
// rest. Tenant t's groups count its finding, as that release's insert
// triggers did: 00020 rebuilds the summaries from the findings.
func TestUpgradeRemovesDeletedTenantsResidue(t *testing.T) {
	s := upgradedFrom(t, 15, `
INSERT INTO finding_counts (tenant, status_code, provider_type, provider_uid, severity, region, check_id, n) VALUES
    ('gone', 'FAIL', 'aws', '1', 'high', 'eu-west-1', 'c', 0);
INSERT INTO scan_finding_counts (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n) VALUES
    ('gone', 's-1', 'FAIL', 'aws', '1', 'high', 'eu-west-1', 'c', 0);
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, check_id, severity, severity_id, status_code, region, provider_type, provider_uid,
    event_time, raw, inserted_at, updated_at)
    VALUES ('00000000-0000-0000-0000-000000000001', 't', 's-2', 'u-1', 'ing', 'c', 'high', 4, 'FAIL', 'eu-west-1', 'aws', '2', now(), '\x7b7d', now(), now());
INSERT INTO scans (tenant, id, provider_type, provider_uid, inserted_at, updated_at) VALUES ('t', 's-2', 'aws', '2', now(), now());
INSERT INTO latest_scans (tenant, provider_type, provider_uid, scan_id, ingestion_id, completed_at) VALUES
    ('gone', 'aws', '1', 's-1', 'ing', now()), ('t', 'aws', '2', 's-2', 'ing', now());
-- The current state is built from the findings (migration 00021): s-2's.
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, check_id, severity, status_code, region, provider_type, provider_uid, event_time, raw, inserted_at, updated_at)
VALUES (gen_random_uuid(), 't', 's-2', 'u', 'ing', 'c', 'high', 'FAIL', 'eu-west-1', 'aws', '2', now(), '\x7b7d', now(), now());`)
	storetest.CheckDeletedTenantsResidueRemoved(t, func(table, tenant string) (n int, err error) {
		err = s.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table+` WHERE tenant = $1`, tenant).Scan(&n)
		return n, err
	})
}

// Migration 00020 brings the rows earlier releases stored to today's
// rules of severity and provider type (storetest.CheckNormalisedUpgrade),
// and rebuilds the summaries from them.
func TestUpgradeNormalisesSeverityAndProviderType(t *testing.T) {
	s := upgradedFrom(t, 19, oldFormRows)
	storetest.CheckNormalisedUpgrade(t, s, summaryDB(s))
}

// TestUpgradeNormalisesProviderTypesAsGoDoes writes scans of the provider
// types storetest.OldProviderTypes lists before migration 00020, whose
// regular expression must drop what ocsf.ProviderType drops: each reads
// back as ocsf.ProviderType has it.
func TestUpgradeNormalisesProviderTypesAsGoDoes(t *testing.T) {
	ctx := context.Background()
	dsn, pool := migratedTo(t, 19)
	for i, pt := range storetest.OldProviderTypes {
		if _, err := pool.Exec(ctx, `INSERT INTO scans (tenant, id, provider_type, provider_uid, inserted_at, updated_at) VALUES ('t', $1, $2, 'x', now(), now())`,
			fmt.Sprintf("pt-%d", i), pt); err != nil {
			t.Fatalf("write the old scan of type %q: %v", pt, err)
		}
	}
	pool.Close()
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open the old database: %v", err)
	}
	defer s.Close()
	storetest.CheckProviderTypesNormalised(t, s)
}

// oldFormRows are storetest.CheckNormalisedUpgrade's rows as PostgreSQL
// held them: the store, not a trigger, counted new findings into the
// summaries and the scans' bounds, so they are written here as it would
// have.
const oldFormRows = `
INSERT INTO findings (id, tenant, scan_id, uid, ingestion_id, check_id, title, severity, severity_id, status_code, region,
    provider_type, provider_uid, event_time, raw, inserted_at, updated_at) VALUES
    ('00000000-0000-0000-0000-000000000001', 't', 's-1', 'u-1', 'ing-1', 'c-1', 'Old finding u-1', 'critical', 1, 'FAIL', 'eu-west-1', 'aws', '1', '2026-01-01 00:00:10Z', '\x7b7d', '2026-02-01Z', '2026-02-01Z'),
    ('00000000-0000-0000-0000-000000000002', 't', 's-1', 'u-2', 'ing-1', 'c-2', 'Old finding u-2', 'informational', 5, 'FAIL', 'eu-west-1', 'aws', '1', '2026-01-01 00:00:20Z', '\x7b7d', '2026-02-01Z', '2026-02-01Z'),
    ('00000000-0000-0000-0000-000000000003', 't', 's-1', 'u-3', 'ing-1', 'c-3', 'Old finding u-3', 'severe', 4, 'FAIL', 'eu-west-1', 'aws', '1', '2026-01-01 00:00:30Z', '\x7b7d', '2026-02-01Z', '2026-02-01Z'),
    ('00000000-0000-0000-0000-000000000004', 't', 's-1', 'u-4', 'ing-1', 'c-4', 'Old finding u-4', 'high', 4, 'FAIL', 'eu-west-1', 'aws', '1', '2026-01-01 00:00:40Z', '\x7b7d', '2026-02-01Z', '2026-02-01Z'),
    ('00000000-0000-0000-0000-000000000005', 't', 's-2', 'u-5', 'ing-1', 'c-5', 'Old finding u-5', 'medium', 3, 'FAIL', 'eu-west-1', 'google cloud', 'p', '2026-01-01 00:00:50Z', '\x7b7d', '2026-02-01Z', '2026-02-01Z'),
    ('00000000-0000-0000-0000-000000000006', 't', 's-3', 'u-6', 'ing-2', 'c-6', 'Old finding u-6', 'low', 2, 'FAIL', 'eu-west-1', 'google-cloud', 'p', '2026-01-01 00:01:00Z', '\x7b7d', '2026-02-02Z', '2026-02-02Z'),
    ('00000000-0000-0000-0000-000000000007', 't', 's-4', 'u-7', 'ing-1', 'c-7', 'Old finding u-7', 'unknown', 3, 'FAIL', 'eu-west-1', 'k8s_cluster', 'c', '2026-01-01 00:01:10Z', '\x7b7d', '2026-02-01Z', '2026-02-01Z');
INSERT INTO scans (tenant, id, provider_type, provider_uid, ingestion_id, inserted_at, updated_at) VALUES
    ('t', 's-1', 'aws', '1', 'ing-1', '2026-02-01Z', '2026-02-01Z'), ('t', 's-2', 'google cloud', 'p', 'ing-1', '2026-02-01Z', '2026-02-01Z'),
    ('t', 's-3', 'google-cloud', 'p', 'ing-2', '2026-02-02Z', '2026-02-02Z'), ('t', 's-4', 'k8s_cluster', 'c', 'ing-1', '2026-02-01Z', '2026-02-01Z');
INSERT INTO latest_scans (tenant, provider_type, provider_uid, scan_id, ingestion_id, completed_at) VALUES
    ('t', 'aws', '1', 's-1', 'ing-1', '2026-02-01 12:00Z'), ('t', 'google cloud', 'p', 's-2', 'ing-1', '2026-02-01 12:00Z'),
    ('t', 'google-cloud', 'p', 's-3', 'ing-2', '2026-02-02 12:00Z'), ('t', 'k8s_cluster', 'c', 's-4', 'ing-1', '2026-02-01 12:00Z');
INSERT INTO finding_counts (tenant, status_code, provider_type, provider_uid, severity, region, check_id, n)
SELECT tenant, status_code, provider_type, provider_uid, severity, region, check_id, count(*)
FROM findings GROUP BY tenant, status_code, provider_type, provider_uid, severity, region, check_id;
INSERT INTO scan_finding_counts (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n)
SELECT tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, count(*)
FROM findings GROUP BY tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id;
INSERT INTO scan_bounds (tenant, scan_id, first_inserted, last_inserted, first_event, last_event)
SELECT tenant, scan_id, min(inserted_at), max(inserted_at), min(event_time), max(event_time)
FROM findings GROUP BY tenant, scan_id;`

// upgradedFrom opens the store on a database migrated up to version, as
// a store of that release left it, with the rows oldRows (SQL) wrote then.
func upgradedFrom(t *testing.T, version int64, oldRows string) *Store {
	t.Helper()
	ctx := context.Background()
	dsn, pool := migratedTo(t, version)
	if _, err := pool.Exec(ctx, oldRows); err != nil {
		t.Fatal(err)
	}
	pool.Close()
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open the old database: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// oldFindingIDs are the ids of the old rows' findings numbered ns: UUIDs
// that end in the number, so they sort as the numbers do.
func oldFindingIDs(ns ...int) []string {
	ids := make([]string, len(ns))
	for i, n := range ns {
		ids[i] = fmt.Sprintf("00000000-0000-0000-0000-%012d", n)
	}
	return ids
}

// migratedTo returns a new database migrated up to version, as a store
// of that release left it, with a pool to write its old rows through (the
// caller closes it before opening the store).
func migratedTo(t *testing.T, version int64) (string, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.FreshDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatal(err)
	}
	return dsn, pool
}
