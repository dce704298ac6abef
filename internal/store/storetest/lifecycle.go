package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// seedIngestion gives ingestion ing of tenant a run, a job-level and a
// record error, findings in scan and an uploaded report, as an ended
// ingestion leaves them.
func seedIngestion(t *testing.T, s store.Store, tenant, ing, scan string) store.Blob {
	t.Helper()
	ctx := ctxT(t)
	blob, err := s.PutBlob(ctx, tenant, strings.NewReader("[] report of "+ing))
	must(t, err, "PutBlob "+ing)
	must(t, s.StartRun(ctx, tenant, ing, 1, 3), "StartRun "+ing)
	idx := 2
	must(t, s.WriteBatch(ctx, tenant, ing, 1, store.Batch{
		Findings: []store.Finding{finding(scan, ing+"-u1"), finding(scan, ing+"-u2")},
		Scans:    []store.Scan{{ID: scan, ProviderType: "aws", ProviderUID: "123456789012", Trigger: "imported"}},
		Errors:   []store.IngestionError{{Code: "job_note"}, {RecordIndex: &idx, Code: "missing_field", Pointer: "/time"}},
	}), "WriteBatch "+ing)
	must(t, s.FinishRun(ctx, tenant, ing, 1, store.Outcome{Status: store.RunSucceeded, Progress: store.Progress{Processed: 3, Invalid: 1}}), "FinishRun "+ing)
	return blob
}

// rowsOf counts what ingestion ing of tenant has in the store.
func rowsOf(t *testing.T, s store.Store, tenant, ing string) (run bool, errs, findings int) {
	t.Helper()
	ctx := ctxT(t)
	_, err := s.GetRun(ctx, tenant, ing)
	switch {
	case err == nil:
		run = true
	case !isNotFound(err):
		t.Fatalf("GetRun %s/%s: %v", tenant, ing, err)
	}
	_, errs, err = s.ListIngestionErrors(ctx, tenant, ing, store.Page{Number: 1, Size: 100})
	must(t, err, "ListIngestionErrors")
	_, findings, err = s.ListFindings(ctx, tenant, store.FindingQuery{IngestionID: ing})
	must(t, err, "ListFindings")
	return run, errs, findings
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

func testDeleteRun(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	seedIngestion(t, s, tenantA, "ing-1", "scan-1")
	seedIngestion(t, s, tenantA, "ing-2", "scan-2")
	seedIngestion(t, s, tenantB, "ing-1", "scan-1")

	must(t, s.DeleteRun(ctx, tenantA, "ing-1"), "DeleteRun")
	for _, tc := range []struct {
		tenant, ing   string
		run           bool
		errs, finding int
	}{
		// The run row and error rows go; findings belong to scans and stay.
		{tenantA, "ing-1", false, 0, 2},
		{tenantA, "ing-2", true, 2, 2},
		{tenantB, "ing-1", true, 2, 2},
	} {
		run, errs, findings := rowsOf(t, s, tc.tenant, tc.ing)
		if run != tc.run || errs != tc.errs || findings != tc.finding {
			t.Errorf("%s/%s after DeleteRun(%s, ing-1): run %v, %d error rows, %d findings; want %v, %d, %d",
				tc.tenant, tc.ing, tenantA, run, errs, findings, tc.run, tc.errs, tc.finding)
		}
	}
	// A worker still running for the deleted ingestion finds no run and
	// writes nothing.
	wantErr(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, batchOf(finding("scan-1", "late"))), store.ErrNotFound, "WriteBatch after DeleteRun")
	wantErr(t, s.UpdateRun(ctx, tenantA, "ing-1", 1, store.Progress{Processed: 1}), store.ErrNotFound, "UpdateRun after DeleteRun")
	must(t, s.DeleteRun(ctx, tenantA, "ing-1"), "DeleteRun of rows already gone")
	must(t, s.DeleteRun(ctx, tenantA, "never-ran"), "DeleteRun of an unknown ingestion")
}

func testDeleteTenantData(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	blobA := seedIngestion(t, s, tenantA, "ing-1", "scan-1")
	seedIngestion(t, s, tenantA, "ing-2", "scan-2")
	blobB := seedIngestion(t, s, tenantB, "ing-1", "scan-1")

	must(t, s.DeleteTenantData(ctx, tenantA), "DeleteTenantData")
	for _, ing := range []string{"ing-1", "ing-2"} {
		if run, errs, findings := rowsOf(t, s, tenantA, ing); run || errs != 0 || findings != 0 {
			t.Errorf("%s/%s after DeleteTenantData: run %v, %d error rows, %d findings; want none", tenantA, ing, run, errs, findings)
		}
	}
	if _, n, err := s.ListScans(ctx, tenantA, store.ScanQuery{}); err != nil || n != 0 {
		t.Errorf("scans of %s after DeleteTenantData: %d (%v), want 0", tenantA, n, err)
	}
	_, err := s.OpenBlob(ctx, tenantA, blobA.ID)
	wantErr(t, err, store.ErrNotFound, "OpenBlob of the deleted tenant")
	if c, ok := s.(BlobCounter); ok {
		blobs, chunks, err := c.CountBlobs(ctx, tenantA)
		must(t, err, "CountBlobs")
		if blobs != 0 || chunks != 0 {
			t.Errorf("%s keeps %d blobs and %d chunks after DeleteTenantData", tenantA, blobs, chunks)
		}
	}

	// The other tenant keeps everything.
	if run, errs, findings := rowsOf(t, s, tenantB, "ing-1"); !run || errs != 2 || findings != 2 {
		t.Errorf("%s/ing-1 after deleting %s: run %v, %d error rows, %d findings; want true, 2, 2", tenantB, tenantA, run, errs, findings)
	}
	if _, n, err := s.ListScans(ctx, tenantB, store.ScanQuery{}); err != nil || n != 1 {
		t.Errorf("scans of %s: %d (%v), want 1", tenantB, n, err)
	}
	rc, err := s.OpenBlob(ctx, tenantB, blobB.ID)
	must(t, err, "OpenBlob of the other tenant")
	rc.Close()

	must(t, s.DeleteTenantData(ctx, tenantA), "DeleteTenantData of a tenant without rows")
}

// CheckDeleteTenantDataLeavesNoRows seeds a completed ingestion in two
// tenants, deletes the first's data and checks, with rows (the tenant's
// rows in each of the engine's tables that have a tenant column), that
// none is left of it in any table, the summaries and the latest scans
// included, and that the other tenant's are all still there.
func CheckDeleteTenantDataLeavesNoRows(t *testing.T, s store.Store, rows func(tenant string) (map[string]int, error)) {
	t.Helper()
	for _, tenant := range []string{tenantA, tenantB} {
		seedIngestion(t, s, tenant, "ing-1", "scan-1")
	}
	before, err := rows(tenantB)
	must(t, err, "count the rows of "+tenantB)
	must(t, s.DeleteTenantData(ctxT(t), tenantA), "DeleteTenantData")
	left, err := rows(tenantA)
	must(t, err, "count the rows of "+tenantA)
	for table, n := range left {
		if n != 0 {
			t.Errorf("%s keeps %d rows of %s after DeleteTenantData", table, n, tenantA)
		}
	}
	after, err := rows(tenantB)
	must(t, err, "count the rows of "+tenantB)
	for table, n := range before {
		if after[table] != n {
			t.Errorf("%s: %d rows of %s after deleting %s, %d before", table, after[table], tenantB, tenantA, n)
		}
	}
	if len(left) == 0 || before["findings"] == 0 {
		t.Fatalf("no table counted (%v, %v)", left, before)
	}
}

// CheckDeletedTenantsResidueRemoved checks, with count (a table's rows of
// a tenant), what the upgrade that removes earlier tenant deletions'
// residue left, on old rows of two tenants in each derived table: tenant
// "gone", deleted (a summary group counting zero, a latest scan without
// its scan row), none; tenant "t", live (a group counting one, a latest
// scan with its scan row), all.
func CheckDeletedTenantsResidueRemoved(t *testing.T, count func(table, tenant string) (int, error)) {
	t.Helper()
	for _, table := range []string{engine.SummaryTable, engine.ScanSummaryTable, "latest_scans"} {
		for tenant, want := range map[string]int{"gone": 0, "t": 1} {
			n, err := count(table, tenant)
			must(t, err, "count the rows of "+table)
			if n != want {
				t.Errorf("%s: %d rows of tenant %s after the upgrade, want %d", table, n, tenant, want)
			}
		}
	}
}
