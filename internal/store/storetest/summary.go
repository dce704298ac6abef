package storetest

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
)

// SummaryDB is the database under a store, which the summary conformance
// test reads and changes behind the store's back.
type SummaryDB struct {
	Dialect engine.Dialect
	// Groups runs a grouped count statement (engine.FindingCountsScan) of
	// dims dimensions and returns its groups (engine.ScanGroups).
	Groups func(ctx context.Context, st engine.Statement, dims int) ([]store.FindingGroup, error)
	// Exec runs a statement that changes rows. The test deletes findings
	// with it: the store has no API for that yet, and the summary must
	// follow any delete all the same.
	Exec func(ctx context.Context, st engine.Statement) error
	// Count runs a statement that returns one number.
	Count func(ctx context.Context, st engine.Statement) (int, error)
}

// summaryValues are few per dimension, so that random rewrites move
// findings between groups that already exist, and empty some.
var summaryValues = map[string][]string{
	"severity":      {"critical", "high", "low"},
	"status_code":   {"FAIL", "PASS"},
	"provider_type": {"aws", "gcp"},
	"provider_uid":  {"111111111111", "222222222222"},
	"check_id":      {"check_a", "check_b", "check_c"},
	"region":        {"eu-west-1", "us-east-1"},
}

func randomFinding(r *rand.Rand, uid string) store.Finding {
	f := finding(fmt.Sprintf("scan-%d", r.IntN(3)), uid)
	pick := func(dim string) string { v := summaryValues[dim]; return v[r.IntN(len(v))] }
	f.Severity, f.StatusCode, f.ProviderType = pick("severity"), pick("status_code"), pick("provider_type")
	f.ProviderUID, f.CheckID, f.Region = pick("provider_uid"), pick("check_id"), pick("region")
	if r.IntN(4) == 0 {
		// The store normalises case: the summary must count what it stores.
		f.Severity, f.StatusCode = strings.ToUpper(f.Severity), strings.ToLower(f.StatusCode)
	}
	return f
}

// RunSummary checks that the finding summary, which FindingCounts and
// ListFindings' count read for filters on summary dimensions, equals a
// GROUP BY over the findings after every step of a random history: new
// findings, upserts that move findings between groups (in one batch and
// across batches, with duplicates in a batch), failed ingestions that give
// findings back, rolled-back batches (stale attempts), deletes, and
// ingestions of two tenants racing on the same findings. After each step
// it also checks that every finding lies within its scan's bounds.
func RunSummary(t *testing.T, s store.Store, db SummaryDB) {
	ctx := ctxT(t)
	h := newHistory(t, s, db, 15)
	check := func(step string) {
		t.Helper()
		for _, tenant := range h.tenants {
			scan, err := engine.FindingCountsScan(db.Dialect, tenant, store.FindingQuery{}, store.CountDimensions)
			must(t, err, "FindingCountsScan")
			want, err := db.Groups(ctx, scan, len(store.CountDimensions))
			must(t, err, step+": GROUP BY over findings")
			got, err := s.FindingCounts(ctx, tenant, store.FindingQuery{}, store.CountDimensions)
			must(t, err, step+": FindingCounts")
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, %s: summary counts differ from a GROUP BY over findings:\n%s", step, tenant, groupDiff(got, want))
			}
			// A filtered count and a listing's count read the summary too;
			// counts of a scan and of the latest scans, which change as
			// ingestions complete, read the summary by scan.
			for _, c := range []struct {
				what    string
				answers func(store.FindingQuery) bool
				by      []string
				qs      []store.FindingQuery
			}{
				{"summary counts by severity", store.FindingQuery.Summarized, []string{"severity"}, []store.FindingQuery{
					{},
					{Severity: []string{"critical", "LOW"}},
					{StatusCode: []string{"fail"}, Region: "eu-west-1"},
					{ProviderType: []string{"gcp"}, ProviderUID: "222222222222", CheckID: "check_b"},
				}},
				{"counts of the summary by scan", store.FindingQuery.ScanSummarized, store.CountDimensions, []store.FindingQuery{
					{Latest: true},
					{Latest: true, Severity: []string{"critical"}, Region: "eu-west-1"},
					{ScanID: "scan-1"},
					{ScanID: "scan-2", StatusCode: []string{"fail"}},
					{Latest: true, ScanID: "scan-0"},
				}},
			} {
				for _, q := range c.qs {
					if !c.answers(q) {
						t.Fatalf("query %+v is not one of the %s", q, c.what)
					}
					scan, err := engine.FindingCountsScan(db.Dialect, tenant, q, c.by)
					must(t, err, "FindingCountsScan")
					want, err := db.Groups(ctx, scan, len(c.by))
					must(t, err, step+": GROUP BY over findings")
					got, err := s.FindingCounts(ctx, tenant, q, c.by)
					must(t, err, step+": FindingCounts")
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("%s, %s, %+v: %s differ from a GROUP BY over findings:\n%s", step, tenant, q, c.what, groupDiff(got, want))
					}
					total := 0
					for _, g := range want {
						total += g.Count
					}
					list := q
					list.Page = store.Page{Size: 1}
					_, n, err := s.ListFindings(ctx, tenant, list)
					must(t, err, step+": ListFindings")
					if n != total {
						t.Fatalf("%s, %s, %+v: ListFindings counts %d, GROUP BY over findings %d", step, tenant, q, n, total)
					}
				}
			}
		}
		if db.Count != nil {
			// A page of the latest view reads an index within its scans'
			// bounds: a finding outside them would never be listed.
			n, err := db.Count(ctx, engine.Statement{SQL: `SELECT count(*) FROM findings f
WHERE NOT EXISTS (SELECT 1 FROM ` + engine.ScanBoundsTable + ` b WHERE b.tenant = f.tenant AND b.scan_id = f.scan_id
    AND f.inserted_at BETWEEN b.first_inserted AND b.last_inserted AND f.event_time BETWEEN b.first_event AND b.last_event)`})
			must(t, err, step+": findings outside their scans' bounds")
			if n != 0 {
				t.Fatalf("%s: %d findings lie outside their scan's bounds", step, n)
			}
		}
	}
	check("empty")
	for step := range 40 {
		check(fmt.Sprintf("step %d: %s", step, h.step()))
	}
	// Ingestions racing on the same findings (on PostgreSQL their batches
	// run side by side and lock summary rows in whatever order they meet).
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		tenant, ing := h.tenants[w%2], fmt.Sprintf("race-%d", w)
		wr := rand.New(rand.NewPCG(uint64(w), 15))
		go func() {
			defer wg.Done()
			if err := s.StartRun(ctx, tenant, ing, 1, 0); err != nil {
				errs <- err
				return
			}
			for range 10 {
				var b store.Batch
				for range 30 {
					b.Findings = append(b.Findings, randomFinding(wr, fmt.Sprintf("uid-%02d", wr.IntN(40))))
				}
				if err := s.WriteBatch(ctx, tenant, ing, 1, b); err != nil {
					errs <- fmt.Errorf("%s: %w", ing, err)
					return
				}
			}
			errs <- s.FinishRun(ctx, tenant, ing, 1, store.Outcome{Status: []store.RunStatus{store.RunSucceeded, store.RunFailed}[w/2]})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err, "racing ingestion")
	}
	check("racing ingestions")
}

// PlayHistory writes RunSummary's random history of steps (ingestions,
// failed ingestions, stale attempts, deletes behind the store's back; no
// races) to s. The same seed writes the same history to any store, so two
// ways of maintaining what is derived from the findings can be compared
// table by table.
func PlayHistory(t *testing.T, s store.Store, db SummaryDB, seed uint64, steps int) {
	h := newHistory(t, s, db, seed)
	h.prefix = fmt.Sprintf("seed-%d-", seed)
	for range steps {
		h.step()
	}
}

// history is a random history of writes to a store.
type history struct {
	t       *testing.T
	s       store.Store
	db      SummaryDB
	r       *rand.Rand
	tenants []string
	run     int
	// prefix sets apart the ingestion ids of one history from another's.
	prefix string
}

func newHistory(t *testing.T, s store.Store, db SummaryDB, seed uint64) *history {
	return &history{t: t, s: s, db: db, r: rand.New(rand.NewPCG(seed, 6)), tenants: []string{tenantA, tenantB}}
}

func (h *history) uid() string { return fmt.Sprintf("uid-%02d", h.r.IntN(40)) }

func (h *history) ingest(tenant string, batches int, fail bool) {
	h.t.Helper()
	ctx := ctxT(h.t)
	h.run++
	ing := fmt.Sprintf("%sing-%d", h.prefix, h.run)
	must(h.t, h.s.StartRun(ctx, tenant, ing, 1, 0), "StartRun "+ing)
	for range batches {
		var b store.Batch
		scans := map[string]bool{}
		for range 1 + h.r.IntN(12) {
			f := randomFinding(h.r, h.uid())
			b.Findings = append(b.Findings, f)
			scans[f.ScanID] = true
		}
		// Each scan is reported for one of two accounts, always the same
		// (a store refuses a scan of another account: ErrScanAccount).
		for _, id := range slices.Sorted(maps.Keys(scans)) {
			b.Scans = append(b.Scans, store.Scan{ID: id, ProviderType: "aws",
				ProviderUID: summaryValues["provider_uid"][int(id[len(id)-1])%2], Trigger: "imported"})
		}
		must(h.t, h.s.WriteBatch(ctx, tenant, ing, 1, b), "WriteBatch "+ing)
	}
	status := store.RunSucceeded
	if fail {
		status = store.RunFailed
	}
	must(h.t, h.s.FinishRun(ctx, tenant, ing, 1, store.Outcome{Status: status}), "FinishRun "+ing)
}

// step writes one random step and says what it was.
func (h *history) step() string {
	h.t.Helper()
	ctx := ctxT(h.t)
	tenant := h.tenants[h.r.IntN(len(h.tenants))]
	switch op := h.r.IntN(10); {
	case op < 5:
		h.ingest(tenant, 1+h.r.IntN(3), false)
		return "ingestion"
	case op < 7:
		h.ingest(tenant, 1+h.r.IntN(3), true)
		return "failed ingestion"
	case op < 8:
		// A superseded attempt writes nothing, and so counts nothing.
		h.run++
		ing := fmt.Sprintf("%sing-%d", h.prefix, h.run)
		must(h.t, h.s.StartRun(ctx, tenant, ing, 1, 0), "StartRun")
		must(h.t, h.s.StartRun(ctx, tenant, ing, 2, 0), "StartRun")
		err := h.s.WriteBatch(ctx, tenant, ing, 1, store.Batch{Findings: []store.Finding{randomFinding(h.r, h.uid())}})
		wantErr(h.t, err, store.ErrStaleAttempt, "stale WriteBatch")
		return "stale attempt"
	default:
		a := engine.NewArgs(h.db.Dialect)
		del := engine.Statement{SQL: `DELETE FROM findings WHERE tenant = ` + a.Add(tenant) + ` AND (uid = ` + a.Add(h.uid()) +
			` OR uid = ` + a.Add(h.uid()) + ` OR scan_id = ` + a.Add(fmt.Sprintf("scan-%d", h.r.IntN(6))) + `)`}
		del.Args = a.Vals
		must(h.t, h.db.Exec(ctx, del), "delete findings")
		return "delete"
	}
}

// groupDiff lists the groups whose counts differ, as "values: got N, want M".
func groupDiff(got, want []store.FindingGroup) string {
	counts := func(gs []store.FindingGroup) map[string]int {
		m := map[string]int{}
		for _, g := range gs {
			m[strings.Join(g.Values, " ")] = g.Count
		}
		return m
	}
	g, w := counts(got), counts(want)
	var lines []string
	for k := range g {
		if g[k] != w[k] {
			lines = append(lines, fmt.Sprintf("  %s: got %d, want %d", k, g[k], w[k]))
		}
	}
	for k := range w {
		if _, ok := g[k]; !ok {
			lines = append(lines, fmt.Sprintf("  %s: got none, want %d", k, w[k]))
		}
	}
	if len(lines) == 0 {
		return "  (same counts, different order)"
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// CheckScanSummary checks the counts of tenant's scan s-1 (two high
// findings and a low one) and of its latest view (scan s-2's critical
// finding), which the summary by scan answers: the rows an upgrade test
// wrote before the migration that builds it.
func CheckScanSummary(t *testing.T, s store.Store, tenant string) {
	t.Helper()
	ctx := ctxT(t)
	for _, c := range []struct {
		q    store.FindingQuery
		want []store.FindingGroup
	}{
		{store.FindingQuery{ScanID: "s-1"}, []store.FindingGroup{{Values: []string{"high"}, Count: 2}, {Values: []string{"low"}, Count: 1}}},
		{store.FindingQuery{Latest: true}, []store.FindingGroup{{Values: []string{"critical"}, Count: 1}}},
	} {
		if !c.q.ScanSummarized() {
			t.Fatalf("query %+v is not one the summary by scan answers", c.q)
		}
		got, err := s.FindingCounts(ctx, tenant, c.q, []string{"severity"})
		must(t, err, "FindingCounts")
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("counts by severity of %+v: got %v, want %v", c.q, got, c.want)
		}
	}
}
