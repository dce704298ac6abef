package engine

import (
	"strings"

	"github.com/posture-dev/posture/internal/store"
)

// FindingColumns is the column list every finding SELECT uses, in the order
// the engines scan them.
const FindingColumns = "id, uid, scan_id, ingestion_id, check_id, title, severity, severity_id, status_code, status, region, provider_type, provider_uid, resource_uid, event_time, raw, inserted_at, updated_at"

// FindingWhere renders the WHERE condition of q for tenant.
func FindingWhere(a *Args, tenant string, q store.FindingQuery) string {
	conds := []string{"tenant = " + a.Add(tenant)}
	if len(q.Severity) > 0 {
		conds = append(conds, a.in("severity", q.Severity, strings.ToLower))
	}
	if len(q.StatusCode) > 0 {
		conds = append(conds, a.in("status_code", q.StatusCode, strings.ToUpper))
	}
	if len(q.ProviderType) > 0 {
		conds = append(conds, a.in("provider_type", q.ProviderType, strings.ToLower))
	}
	for _, eq := range []struct{ col, val string }{
		{"provider_uid", q.ProviderUID},
		{"check_id", q.CheckID},
		{"region", q.Region},
		{"scan_id", q.ScanID},
		{"ingestion_id", q.IngestionID},
	} {
		if eq.val != "" {
			conds = append(conds, eq.col+" = "+a.Add(eq.val))
		}
	}
	if q.Latest {
		// The latest scans are few (those that win a check), and the
		// natural key (tenant, scan_id, uid) finds each one's findings; of
		// those, the runs that win their check are current.
		conds = append(conds, "scan_id IN (SELECT scan_id FROM latest_scans WHERE tenant = "+a.Add(tenant)+")", currentRun(a, tenant))
	}
	if q.Delta != "" {
		conds = append(conds, deltaCond(a, tenant, q.Delta))
	}
	if q.Search != "" {
		conds = append(conds, searchConds(a, q)...)
	}
	if q.Muted != store.MutedAny {
		conds = append(conds, mutedCond(a, tenant, q.Muted))
	}
	return strings.Join(conds, " AND ")
}

// ScanWhere renders the WHERE condition of q for tenant over scans aliased s.
func ScanWhere(a *Args, tenant string, q store.ScanQuery) string {
	conds := []string{"s.tenant = " + a.Add(tenant)}
	if q.ProviderType != "" {
		conds = append(conds, "s.provider_type = "+a.Add(strings.ToLower(q.ProviderType)))
	}
	if q.ProviderUID != "" {
		conds = append(conds, "s.provider_uid = "+a.Add(q.ProviderUID))
	}
	if q.IngestionID != "" {
		conds = append(conds, "s.ingestion_id = "+a.Add(q.IngestionID))
	}
	return strings.Join(conds, " AND ")
}

// ScanFailures counts the FAIL findings of tenant's scans ids by scan and
// severity, from the finding summary by scan (scan_finding_counts), which
// holds a scan's groups rather than its findings: a page of scans reads a
// few rows each however large its scans.
func ScanFailures(d Dialect, tenant string, ids []string) Statement {
	a := NewArgs(d)
	sql := `SELECT scan_id, severity, CAST(sum(n) AS BIGINT) FROM ` + ScanSummaryTable + `
WHERE tenant = ` + a.Add(tenant) + ` AND status_code = 'FAIL' AND ` + a.in("scan_id", ids, func(v string) string { return v }) + `
GROUP BY scan_id, severity HAVING sum(n) > 0`
	return Statement{SQL: sql, Args: a.Vals}
}

// ReadScanFailures puts the rows of ScanFailures into the scans they count.
func ReadScanFailures(rows Rows, scans []store.Scan) error {
	at := make(map[string]*store.Scan, len(scans))
	for i := range scans {
		at[scans[i].ID] = &scans[i]
	}
	for rows.Next() {
		var id, severity string
		var n int64
		if err := rows.Scan(&id, &severity, &n); err != nil {
			return err
		}
		sc := at[id]
		if sc == nil {
			continue
		}
		if sc.Failing == nil {
			sc.Failing = map[string]int{}
		}
		sc.Failing[severity] = int(n)
	}
	return rows.Err()
}
