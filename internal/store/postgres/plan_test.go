package postgres

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
	"github.com/posture-dev/posture/internal/store/storetest"
)

// TestQueryPlans asks PostgreSQL for the plan of every statement the store
// issues for each documented findings query shape, and fails when one
// reads every finding (see storetest.PlanProblems).
//
// The table holds two tenants' findings, analysed. On a table this small
// reading the whole heap is honestly the cheapest plan, where at a million
// rows it is the slowest, so the session sets enable_seqscan and
// enable_bitmapscan off: the planner then reads through an index whenever
// one can serve the query, and a "Seq Scan on findings" left in the plan
// means none can. (A bitmap scan on the tenant alone is the same full read
// of the tenant's rows, cheap only because the table is small.) Sorting
// stays enabled, so a Sort node in an unfiltered listing means no index
// gives its order; an Incremental Sort, within equal leading values, is
// fine. Bitmap scans are enabled again for the statements of a search, as
// the trigram index can only be read through one.
func TestQueryPlans(t *testing.T) {
	ctx := context.Background()
	s, conn := planStore(t)
	allVisible(t, conn)
	for _, q := range []string{"SET enable_seqscan = off", "SET enable_bitmapscan = off"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	explain := func(t *testing.T, st engine.Statement) []string {
		t.Helper()
		// A GIN index, which the trigram search reads, is only ever read
		// through a bitmap: a search's statements may use one.
		if strings.Contains(st.SQL, " ILIKE ") {
			set(t, conn, "enable_bitmapscan", "on")
			defer set(t, conn, "enable_bitmapscan", "off")
			set(t, conn, "cpu_tuple_cost", "1")
			defer set(t, conn, "cpu_tuple_cost", "DEFAULT")
			// At scale the tenant's index alone is millions of entries;
			// on this small table the planner would AND all of them into
			// the search's bitmap to fetch a few rows less.
			set(t, conn, "cpu_index_tuple_cost", "1")
			defer set(t, conn, "cpu_index_tuple_cost", "DEFAULT")
		}
		// A deep numbered page seeks to a key a subquery reads, a bound
		// the planner cannot see and takes for a third of the table: on
		// ten million findings it counted the keys before it with
		// parallel workers. Here workers are made to cost nothing, as on
		// a table large enough to want them, so that such a plan shows
		// its Gather, which PlanProblems fails.
		if strings.HasPrefix(st.SQL, "WITH last AS") {
			for _, name := range []string{"parallel_setup_cost", "parallel_tuple_cost", "min_parallel_index_scan_size", "min_parallel_table_scan_size"} {
				set(t, conn, name, "0")
				defer set(t, conn, name, "DEFAULT")
			}
		}
		return explainLines(t, conn, st)
	}
	storetest.CheckPlans(t, s, engine.Postgres, explain)
	t.Run("observations", func(t *testing.T) { storetest.CheckObservationPlans(t, engine.Postgres, explain) })
	t.Run("merge", func(t *testing.T) { storetest.CheckMergePlans(t, engine.Postgres, explain) })
}

// planStore opens a fresh store holding storetest.WritePlanFindings and a
// connection of its own, whose session settings the test may change.
func planStore(t *testing.T) (*Store, *pgxpool.Conn) {
	t.Helper()
	s := openFresh(t)
	storetest.WritePlanFindings(t, s)
	conn, err := s.pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return s, conn
}

// explainLines is PostgreSQL's plan of st, a line each.
func explainLines(t *testing.T, conn *pgxpool.Conn, st engine.Statement) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "EXPLAIN "+st.SQL, st.Args...)
	if err != nil {
		t.Fatalf("explain %s: %v", st.SQL, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

func set(t *testing.T, conn *pgxpool.Conn, name, v string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), "SET "+name+" = "+v); err != nil {
		t.Fatalf("SET %s = %s: %v", name, v, err)
	}
}

// allVisible vacuums and analyses findings until every page is marked
// all-visible. Counts are meant to be index-only scans, which the planner
// costs as such only over all-visible pages; a VACUUM that runs while an
// autovacuum ANALYZE of the fresh table still holds its snapshot leaves the
// new pages unmarked, and the plan then depends on that race.
func allVisible(t *testing.T, conn *pgxpool.Conn) {
	t.Helper()
	ctx := context.Background()
	var pages, visible int32
	for range 50 {
		if _, err := conn.Exec(ctx, "VACUUM ANALYZE findings"); err != nil {
			t.Fatalf("VACUUM ANALYZE findings: %v", err)
		}
		if err := conn.QueryRow(ctx, "SELECT relpages, relallvisible FROM pg_class WHERE oid = 'findings'::regclass").Scan(&pages, &visible); err != nil {
			t.Fatal(err)
		}
		if visible == pages {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("findings: %d of %d pages all-visible after repeated VACUUM; something holds an old snapshot", visible, pages)
}

// TestLatestCountsLoopOverTheLatestScans checks that a count of the latest
// view reads scan by scan, from the summary by scan or, for a search, the
// latest scans' findings through findings_scan, even when the planner
// takes those scans for a large share of the table, as it does when the
// latest scans are smaller than the average one (a million findings in
// scans of 62,500, the latest four of 5,000: it read the whole table to
// count 20,000). n_distinct makes each scan a sixteenth of the table here;
// sequential scans stay allowed.
func TestLatestCountsLoopOverTheLatestScans(t *testing.T) {
	ctx := context.Background()
	_, conn := planStore(t)
	if _, err := conn.Exec(ctx, "ALTER TABLE findings ALTER COLUMN scan_id SET (n_distinct = 16)"); err != nil {
		t.Fatal(err)
	}
	allVisible(t, conn)
	listCount := func(q store.FindingQuery) engine.Statement {
		count, _, err := engine.FindingList(engine.Postgres, "tenant-a", q)
		if err != nil {
			t.Fatal(err)
		}
		return count
	}
	groups := func(q store.FindingQuery, by ...string) engine.Statement {
		st, err := engine.FindingCounts(engine.Postgres, "tenant-a", q, by)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	byScan := func(table, index string) *regexp.Regexp {
		return regexp.MustCompile(`(Index (Only )?Scan using ` + index + ` on ` + table + `|Bitmap Index Scan on ` + index + `)\b.*\n\s+Index Cond: \(\(tenant = '[^']*'::text( COLLATE "C")?\) AND \(scan_id = (l|latest_scans)\.scan_id\)\)`)
	}
	summary, findings := byScan("scan_finding_counts", "scan_finding_counts_pkey"), byScan("findings", "findings_scan")
	for _, tc := range []struct {
		name string
		st   engine.Statement
		want *regexp.Regexp
	}{
		{"counts by severity", groups(store.FindingQuery{Latest: true}, "severity"), summary},
		{"counts by check, failing", groups(store.FindingQuery{Latest: true, StatusCode: []string{"FAIL"}}, "check_id"), summary},
		{"the listing's count, a severity", listCount(store.FindingQuery{Latest: true, Severity: []string{"critical"}, CountLimit: 10100}), summary},
		{"counts by check, search", groups(store.FindingQuery{Latest: true, Search: "bucket", CountLimit: 1000}, "check_id"), findings},
		{"the listing's count, a search", listCount(store.FindingQuery{Latest: true, Search: "bucket", CountLimit: 20}), findings},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := explainLines(t, conn, tc.st)
			text := strings.Join(plan, "\n")
			if !tc.want.MatchString(text) || strings.Contains(text, "Seq Scan on") || strings.Contains(text, "findings_search") {
				t.Errorf("does not read the latest scans one by one through (tenant, scan_id):\n%s\nplan:\n  %s", tc.st.SQL, strings.Join(plan, "\n  "))
			}
		})
	}
}
