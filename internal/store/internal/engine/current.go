package engine

import (
	"strings"

	"github.com/posture-dev/posture/internal/store"
)

// The current state (docs/decisions/0023-current-state-by-check.md): for
// each account and check, the findings of the newest run of that check,
// a run being one scan's findings of one account and check. These tables
// hold it; FinishRun keeps them when an ingestion succeeds (MergeCurrent).
//
//   - ingestion_scans: the scans each ingestion wrote, recorded by
//     WriteBatch. A successful ingestion merges exactly those, whatever
//     another ingestion of one of them wrote since into scans.ingestion_id.
//   - check_runs: every run an ingestion that succeeded wrote to, with its
//     time (its findings' newest event time) and its merge's number (upload
//     order, which breaks ties of time).
//   - current_checks: per account and check, the winning run's scan and the
//     scan of the run it replaced (what delta and resolved compare with),
//     and the number of the merge that last touched it.
//   - latest_scans: the scans that win at least one check: the current
//     state's findings are read scan by scan through them.
//   - finding_deltas: the current findings that are new or changed.
//   - resolved_findings: the previous runs' failing findings that now pass
//     or are gone.

// CurrentTables are the tables of the current state, deleted with a
// tenant's data.
var CurrentTables = []string{"ingestion_scans", "check_runs", "current_checks", "finding_deltas", "resolved_findings"}

// The deltas a current finding may carry, and the filter that lists the
// resolved ones.
const (
	DeltaNew      = "new"
	DeltaChanged  = "changed"
	DeltaResolved = "resolved"
)

// currentRun renders "the row is of a run that wins its check": the
// row's account, check and scan among current_checks'. It is a row value
// tested against the tenant's winners, not correlated, so that it means
// the same under whatever name the statement gives the findings (or the
// summary by scan) it reads.
//
// On PostgreSQL it is also kept from becoming a join (Dialect.Unestimated):
// as a semi-join inside a page's ordered read, the planner hashed the
// current runs and read every finding of a value within the scans' spans
// to sort them, where the index's order and the page's end stop early
// (522 ms for a page by severity at a million findings, 20 ms at 10,000).
// Tested row by row, it is one probe of a hash built once.
func currentRun(a *Args, tenant string) string {
	cond := "(provider_type, provider_uid, check_id, scan_id) IN (SELECT provider_type, provider_uid, check_id, scan_id FROM current_checks WHERE tenant = " + a.Add(tenant) + ")"
	if a.d.Unestimated != nil {
		return a.d.Unestimated(cond)
	}
	return cond
}

// deltaCond renders q.Delta's condition: among the current findings, the
// new or changed ones; the resolved are a set of their own.
func deltaCond(a *Args, tenant, delta string) string {
	if delta == DeltaResolved {
		return "id IN (SELECT id FROM resolved_findings WHERE tenant = " + a.Add(tenant) + ")"
	}
	return "id IN (SELECT id FROM finding_deltas WHERE tenant = " + a.Add(tenant) + " AND delta = " + a.Add(delta) + ")"
}

// ValidDelta reports whether d is a FindingQuery.Delta.
func ValidDelta(d string) bool {
	return d == "" || d == DeltaNew || d == DeltaChanged || d == DeltaResolved
}

// CurrentMerge is the statements FinishRun runs, in order and in its
// transaction, when ingestion succeeds; merge is the merge's number (from
// NextMerge), which must exceed every earlier merge's of the tenant. Merges of one tenant must not
// run at once (PostgreSQL takes MergeLock first; SQLite has one writer).
//
// The runs of the ingestion's scans are counted in check_runs; each of its
// runs that is now the newest of its check becomes the check's current one
// (a run already current is merged again: another ingestion may have added
// to it); for those checks, the deltas and the resolved findings are
// computed again against the run each replaced; and latest_scans follows.
// Every statement reads the findings of the ingestion's scans, or of the
// runs they replaced, scan by scan, and tests each against its check's
// row of current_checks: a merge costs the findings it concerns, not the
// tenant's history. The tests are correlated subqueries that " OFFSET 0"
// keeps from becoming joins: as a join, PostgreSQL drove from
// current_checks (a new table it estimated at one row) and read the
// tenant's findings once per check through findings_facets, more than ten
// minutes for 100,000 findings. A probe for a uid's other findings reads
// the (tenant, uid) index, which holds a few findings per uid (byUID).
func CurrentMerge(d Dialect, tenant, ingestion string, merge int64) []Statement {
	var out []Statement
	for i := 0; ; i++ {
		a := NewArgs(d)
		sql, ok := currentMergeStatement(i, mergeParams{a: a, tenant: tenant, ingestion: ingestion, merge: merge})
		if !ok {
			return out
		}
		out = append(out, Statement{SQL: sql, Args: a.Vals})
	}
}

// mergeParams hands out the placeholders of a merge statement, each bound
// on its first use: PostgreSQL refuses a parameter a statement never
// reads, as it cannot tell its type.
type mergeParams struct {
	a                 *Args
	tenant, ingestion string
	merge             int64
	t, ing, n         string
}

func (p *mergeParams) param(got *string, v any) string {
	if *got == "" {
		*got = p.a.Add(v)
	}
	return *got
}

// currentMergeStatement renders the i-th statement of CurrentMerge, or
// false past the last.
func currentMergeStatement(i int, p mergeParams) (string, bool) {
	t := p.param(&p.t, p.tenant)
	ing := func() string { return p.param(&p.ing, p.ingestion) }
	n := func() string { return p.param(&p.n, p.merge) }
	scans := func() string {
		return "(SELECT scan_id FROM ingestion_scans WHERE tenant = " + t + " AND ingestion_id = " + ing() + ")"
	}
	touched := func() string { return "current_checks WHERE tenant = " + t + " AND touched = " + n() }
	// fence keeps PostgreSQL from turning a correlated test into a join
	// (see CurrentMerge); SQLite tests it row by row as written.
	fence := ""
	if p.a.d.IndexedBy == nil {
		fence = " OFFSET 0"
	}
	// scanByScan renders the findings (as alias) of the scans that list
	// (a SELECT of one column, scan) names, read scan by scan through the
	// scan's index: a LATERAL subquery on PostgreSQL, whose planner took
	// the scans for one row and read every failing finding of the tenant
	// instead; a CROSS JOIN, which keeps its loops in that order, on SQLite.
	scanByScan := func(list, alias string) string {
		if p.a.d.IndexedBy == nil {
			return "(" + list + ") AS scans CROSS JOIN LATERAL (SELECT * FROM findings WHERE tenant = " + t +
				" AND scan_id = scans.scan" + fence + ") AS " + alias
		}
		return "(" + list + ") AS scans CROSS JOIN findings AS " + alias + " ON " + alias + ".tenant = " + t + " AND " + alias + ".scan_id = scans.scan"
	}
	// once keeps a subquery whose column the outer query reads twice from
	// being merged into it: SQLite copies the column's expression into each
	// place that reads it, and the correlated probe of the deltas then ran
	// twice per finding (about a fifth of the merge's time). SQLite never merges a
	// subquery that has an OFFSET, and takes an OFFSET only after a LIMIT.
	once := fence
	if once == "" {
		once = " LIMIT -1 OFFSET 0"
	}
	// join keeps SQLite's loops in the order written (scans, their
	// findings, each one's check); PostgreSQL's CROSS JOIN takes no ON.
	join := " CROSS JOIN "
	if p.a.d.IndexedBy == nil {
		join = " JOIN "
	}
	mine := func() string {
		return "SELECT scan_id AS scan FROM ingestion_scans WHERE tenant = " + t + " AND ingestion_id = " + ing()
	}
	sameCheck := func(x, y string) string {
		return x + ".tenant = " + y + ".tenant AND " + x + ".provider_type = " + y + ".provider_type AND " +
			x + ".provider_uid = " + y + ".provider_uid AND " + x + ".check_id = " + y + ".check_id"
	}
	// checkOf renders "f's check's row of current_checks, which also
	// meets cond": through its key, cond hidden from the other indexes.
	checkOf := func(f, cond string) string {
		return "EXISTS (SELECT 1 FROM current_checks c WHERE " + sameCheck("c", f) + " AND " + byUID(cond) + fence + ")"
	}
	switch i {
	case 0:
		// The ingestion's runs, with their time as it now stands.
		return `INSERT INTO check_runs (tenant, provider_type, provider_uid, check_id, scan_id, run_time, seq)
SELECT f.tenant, f.provider_type, f.provider_uid, f.check_id, f.scan_id, max(f.event_time), ` + n() + `
FROM ` + scanByScan(mine(), "f") + ` WHERE true
GROUP BY f.tenant, f.provider_type, f.provider_uid, f.check_id, f.scan_id
ON CONFLICT (tenant, provider_type, provider_uid, check_id, scan_id) DO UPDATE SET run_time = excluded.run_time, seq = excluded.seq`, true
	case 1:
		// Those that are now the newest of their check (time, then upload
		// order, then scan id) become current; one already current keeps the
		// run it replaced.
		return `INSERT INTO current_checks (tenant, provider_type, provider_uid, check_id, scan_id, previous_scan_id, touched)
SELECT r.tenant, r.provider_type, r.provider_uid, r.check_id, r.scan_id, NULL, ` + n() + `
FROM check_runs r WHERE r.tenant = ` + t + ` AND r.scan_id IN ` + scans() + ` AND NOT EXISTS (
    SELECT 1 FROM check_runs o WHERE ` + sameCheck("o", "r") + `
        AND (o.run_time > r.run_time OR (o.run_time = r.run_time AND (o.seq > r.seq OR (o.seq = r.seq AND o.scan_id > r.scan_id)))))
ON CONFLICT (tenant, provider_type, provider_uid, check_id) DO UPDATE SET
    previous_scan_id = CASE WHEN current_checks.scan_id = excluded.scan_id THEN current_checks.previous_scan_id ELSE current_checks.scan_id END,
    scan_id = excluded.scan_id, touched = excluded.touched`, true
	case 2:
		return `DELETE FROM finding_deltas WHERE tenant = ` + t + ` AND (provider_type, provider_uid, check_id) IN (SELECT provider_type, provider_uid, check_id FROM ` + touched() + `)`, true
	case 3:
		// New: its uid was never seen for the account before (in another
		// scan, at or before its time). Changed: its status differs from
		// the same uid's in the run its run replaced. One read of the
		// uid's findings tells both: 2 when seen, plus 1 when changed.
		return `INSERT INTO finding_deltas (tenant, id, provider_type, provider_uid, check_id, delta)
SELECT tenant, id, provider_type, provider_uid, check_id, CASE WHEN code < 2 THEN '` + DeltaNew + `' ELSE '` + DeltaChanged + `' END
FROM (SELECT f.tenant, f.id, f.provider_type, f.provider_uid, f.check_id, (
        SELECT max(CASE WHEN g.provider_type = f.provider_type AND g.provider_uid = f.provider_uid
                AND g.scan_id <> f.scan_id AND g.event_time <= f.event_time THEN 2 ELSE 0 END)
            + max(CASE WHEN g.status_code <> f.status_code AND g.scan_id = c.previous_scan_id THEN 1 ELSE 0 END)
        FROM findings g WHERE g.tenant = f.tenant AND g.uid = f.uid) AS code
    FROM ` + scanByScan(mine(), "f") + join + `current_checks c ON ` + sameCheck("c", "f") + ` AND ` + byUID("c.scan_id = f.scan_id AND c.touched = "+n()) + `
    WHERE true` + once + `) AS probed
WHERE code <> 2`, true
	case 4:
		return `DELETE FROM resolved_findings WHERE tenant = ` + t + ` AND (provider_type, provider_uid, check_id) IN (SELECT provider_type, provider_uid, check_id FROM ` + touched() + `)`, true
	case 5:
		// Resolved: failing in the replaced run, and not failing in the
		// current one (passing, or gone).
		return `INSERT INTO resolved_findings (tenant, id, provider_type, provider_uid, check_id)
SELECT p.tenant, p.id, p.provider_type, p.provider_uid, p.check_id
FROM ` + scanByScan("SELECT DISTINCT previous_scan_id AS scan FROM "+touched()+" AND previous_scan_id IS NOT NULL", "p") + `
WHERE p.status_code = 'FAIL' AND ` + checkOf("p", "c.previous_scan_id = p.scan_id AND c.touched = "+n()) + `
    AND NOT EXISTS (
        SELECT 1 FROM findings n WHERE n.tenant = p.tenant AND n.uid = p.uid AND ` + byUID(`n.status_code = 'FAIL'
            AND n.scan_id = (SELECT c.scan_id FROM current_checks c WHERE `+sameCheck("c", "p")+`)`) + fence + `)`, true
	case 6:
		return `INSERT INTO latest_scans (tenant, scan_id) SELECT DISTINCT tenant, scan_id FROM ` + touched() + ` ON CONFLICT (tenant, scan_id) DO NOTHING`, true
	case 7:
		return `DELETE FROM latest_scans WHERE tenant = ` + t + ` AND scan_id IN (SELECT previous_scan_id FROM ` + touched() + `)
    AND NOT EXISTS (SELECT 1 FROM current_checks c WHERE c.tenant = latest_scans.tenant AND c.scan_id = latest_scans.scan_id)`, true
	}
	return "", false
}

// byUID renders the conditions of a probe that looks a uid's findings up
// through the (tenant, uid) index, where they are a few, so that no other
// index serves them: given the scan or the event time, PostgreSQL read the
// whole scan through findings_scan, or every earlier finding through
// findings_time, for each finding probed (40 s for 20,000).
func byUID(conds string) string { return "CASE WHEN " + conds + " THEN 1 ELSE 0 END = 1" }

// NextMerge renders the number of a tenant's next merge ($1: the tenant):
// one past the last, read from current_checks' (tenant, touched) index.
func NextMerge(d Dialect) string {
	return `SELECT coalesce(max(touched), 0) + 1 FROM current_checks WHERE tenant = ` + d.Param(1)
}

// MergeLock renders PostgreSQL's lock that keeps one tenant's merges
// apart ($1: the tenant): each decides what is newest from the runs it
// sees, and two at once would each miss the other's.
const MergeLock = `SELECT pg_advisory_xact_lock(hashtextextended('posture current state ' || $1, 0))`

// Annotations renders the statement that reads, for the current findings
// listed (their ids from $2 on; the tenant is $1), when each one's uid was
// first seen for its account and its delta: what a listing of the current
// state adds to each finding. first_seen_at is the earliest event time of
// the uid's findings of that account, through the (tenant, uid) index.
func Annotations(d Dialect, ids int) string {
	ps := make([]string, ids)
	for i := range ps {
		ps[i] = d.Param(i + 2)
	}
	return `SELECT f.id,
    (SELECT min(g.event_time) FROM findings g WHERE g.tenant = f.tenant AND g.uid = f.uid
        AND g.provider_type = f.provider_type AND g.provider_uid = f.provider_uid),
    coalesce((SELECT delta FROM finding_deltas x WHERE x.tenant = f.tenant AND x.id = f.id), '')
FROM findings f WHERE f.tenant = ` + d.Param(1) + ` AND f.id IN (` + strings.Join(ps, ", ") + `)`
}

// Annotated reports whether a listing of q carries the current state's
// annotations (Finding.FirstSeenAt and Delta).
func Annotated(q store.FindingQuery) bool { return q.Latest || q.Delta != "" }

// CurrentQuery is q as the statements read it: the resolved findings are
// those of replaced runs, never of the current state, so that filter
// stands in for Latest.
func CurrentQuery(q store.FindingQuery) store.FindingQuery {
	if q.Delta == DeltaResolved {
		q.Latest = false
	}
	return q
}

// AnnotatedDelta is a listed finding's delta: "resolved" in the listing
// of the resolved findings, else the one stored.
func AnnotatedDelta(q store.FindingQuery, stored string) string {
	if q.Delta == DeltaResolved {
		return DeltaResolved
	}
	return stored
}
