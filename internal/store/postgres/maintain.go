package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// maintainNew is one statement that counts a batch's new findings into both
// finding summaries and widens their scans' bounds to them. The batch is
// grouped in the store's process (engine.SummarizeByTenant,
// SummarizeByScan, ScanSpans), and each group is one row of an upsert, in
// key order, so that concurrent batches lock the groups they share in one
// order. An empty array leaves its table alone.
const maintainNew = `
WITH counts AS (
    INSERT INTO finding_counts AS c (tenant, status_code, provider_type, provider_uid, severity, region, check_id, n)
    SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[])
    ON CONFLICT (tenant, status_code, provider_type, provider_uid, severity, region, check_id)
    DO UPDATE SET n = c.n + excluded.n
), scan_counts AS (
    INSERT INTO scan_finding_counts AS c (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id, n)
    SELECT $1, * FROM unnest($9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::bigint[])
    ON CONFLICT (tenant, scan_id, status_code, provider_type, provider_uid, severity, region, check_id)
    DO UPDATE SET n = c.n + excluded.n
)
INSERT INTO scan_bounds AS b (tenant, scan_id, first_inserted, last_inserted, first_event, last_event)
SELECT $1, * FROM unnest($17::text[], $18::timestamptz[], $19::timestamptz[], $20::timestamptz[], $21::timestamptz[])
ON CONFLICT (tenant, scan_id) DO UPDATE
SET first_inserted = least(b.first_inserted, excluded.first_inserted),
    last_inserted = greatest(b.last_inserted, excluded.last_inserted),
    first_event = least(b.first_event, excluded.first_event),
    last_event = greatest(b.last_event, excluded.last_event)
WHERE excluded.first_inserted < b.first_inserted OR excluded.last_inserted > b.last_inserted
    OR excluded.first_event < b.first_event OR excluded.last_event > b.last_event`

// addNew counts a batch's new findings into both finding summaries and
// widens their scans' bounds, once per batch (one row a group, one a
// scan), where statement triggers on INSERT grouped the rows in the server
// from a transition table that held a copy of each inserted row, raw
// record included (docs/decisions/0021-maintenance-by-batch.md). A
// rewritten finding's changes are still its UPDATE triggers'.
func addNew(ctx context.Context, tx pgx.Tx, tenant string, added []store.Finding, leftOut map[string]bool) error {
	if len(added) == 0 {
		return nil
	}
	args := make([]any, 0, 21)
	args = append(args, tenant)
	groups := func(gs []engine.SummaryGroup, byScan bool) {
		n := len(gs)
		scan, status, ptype, puid, sev, region, check, counts := make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
		for i, g := range gs {
			scan[i], status[i], ptype[i], puid[i], sev[i], region[i], check[i], counts[i] =
				g.ScanID, g.StatusCode, g.ProviderType, g.ProviderUID, g.Severity, g.Region, g.CheckID, int64(g.N)
		}
		if byScan {
			args = append(args, scan)
		}
		args = append(args, status, ptype, puid, sev, region, check, counts)
	}
	var byTenant, byScan []engine.SummaryGroup
	if !leftOut[store.StructureSummary] {
		byTenant = engine.SummarizeByTenant(added)
	}
	if !leftOut[store.StructureScanSummary] {
		byScan = engine.SummarizeByScan(added)
	}
	groups(byTenant, false)
	groups(byScan, true)
	var spans []engine.ScanSpan
	if !leftOut[store.StructureSpans] {
		spans = engine.ScanSpans(added)
	}
	n := len(spans)
	scan, firstIns, lastIns, firstEv, lastEv := make([]string, n), make([]time.Time, n), make([]time.Time, n),
		make([]time.Time, n), make([]time.Time, n)
	for i, s := range spans {
		scan[i], firstIns[i], lastIns[i], firstEv[i], lastEv[i] = s.ScanID, s.FirstInserted, s.LastInserted, s.FirstEvent, s.LastEvent
	}
	args = append(args, scan, firstIns, lastIns, firstEv, lastEv)
	if _, err := tx.Exec(ctx, maintainNew, args...); err != nil {
		return fmt.Errorf("postgres: count new findings into the summaries: %w", err)
	}
	return nil
}
