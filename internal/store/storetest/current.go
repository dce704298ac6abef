package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// checkKey is an account and a check: the unit of the current state.
type checkKey struct{ ptype, puid, check string }

func keyOfFinding(f store.Finding) checkKey {
	return checkKey{f.ProviderType, f.ProviderUID, f.CheckID}
}

// currentModel is the current state worked out from what was uploaded,
// the way docs/decisions/0023-current-state-by-check.md states it, merge
// by merge: what the stores must agree with.
type currentModel struct {
	seq      int
	runSeq   map[string]int                    // scan → number of its last merge
	runTime  map[checkKey]map[string]time.Time // run → its findings' newest event time at its last merge
	winner   map[checkKey]string               // check → current run's scan
	previous map[checkKey]string               // check → the scan of the run the current one replaced
	deltas   map[checkKey]map[string]string    // check → finding id → new or changed
	resolved map[checkKey][]string             // check → ids of the replaced run's findings now resolved
}

func newCurrentModel() *currentModel {
	return &currentModel{runSeq: map[string]int{}, runTime: map[checkKey]map[string]time.Time{}, winner: map[checkKey]string{},
		previous: map[checkKey]string{}, deltas: map[checkKey]map[string]string{}, resolved: map[checkKey][]string{}}
}

// merge is a successful ingestion that wrote scans, history being every
// finding stored at that moment.
func (m *currentModel) merge(history []store.Finding, scans ...string) {
	m.seq++
	merged := map[string]bool{}
	for _, s := range scans {
		m.runSeq[s] = m.seq
		merged[s] = true
	}
	for _, f := range history {
		if !merged[f.ScanID] {
			continue
		}
		k := keyOfFinding(f)
		if m.runTime[k] == nil {
			m.runTime[k] = map[string]time.Time{}
		}
		if t, ok := m.runTime[k][f.ScanID]; !ok || f.Time.After(t) {
			m.runTime[k][f.ScanID] = f.Time
		}
	}
	// A merged scan's runs are timed afresh: a run's time is its
	// findings' newest at its last merge.
	for k, runs := range m.runTime {
		for scan := range runs {
			if !merged[scan] {
				continue
			}
			var newest time.Time
			for _, f := range history {
				if f.ScanID == scan && keyOfFinding(f) == k && f.Time.After(newest) {
					newest = f.Time
				}
			}
			runs[scan] = newest
		}
	}
	for k, runs := range m.runTime {
		best := ""
		for scan := range runs {
			if best == "" || m.newer(k, scan, best) {
				best = scan
			}
		}
		if !merged[best] {
			continue
		}
		if old, ok := m.winner[k]; ok && old != best {
			m.previous[k] = old
		}
		m.winner[k] = best
		m.deltas[k], m.resolved[k] = map[string]string{}, nil
		prev := m.previous[k]
		for _, f := range history {
			if f.ScanID != best || keyOfFinding(f) != k {
				continue
			}
			seen, changed := false, false
			for _, g := range history {
				if g.UID == f.UID && g.ProviderType == f.ProviderType && g.ProviderUID == f.ProviderUID && g.ScanID != f.ScanID && !g.Time.After(f.Time) {
					seen = true
				}
				if prev != "" && g.ScanID == prev && g.UID == f.UID && g.StatusCode != f.StatusCode {
					changed = true
				}
			}
			switch {
			case !seen:
				m.deltas[k][f.ID] = "new"
			case changed:
				m.deltas[k][f.ID] = "changed"
			}
		}
		if prev == "" {
			continue
		}
		for _, p := range history {
			if p.ScanID != prev || keyOfFinding(p) != k || p.StatusCode != "FAIL" {
				continue
			}
			failing := false
			for _, n := range history {
				if n.ScanID == best && n.UID == p.UID && n.StatusCode == "FAIL" {
					failing = true
				}
			}
			if !failing {
				m.resolved[k] = append(m.resolved[k], p.ID)
			}
		}
	}
}

// newer orders two runs of one check: time, then upload order (the
// number of the last merge), then scan id.
func (m *currentModel) newer(k checkKey, a, b string) bool {
	ta, tb := m.runTime[k][a], m.runTime[k][b]
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	if m.runSeq[a] != m.runSeq[b] {
		return m.runSeq[a] > m.runSeq[b]
	}
	return a > b
}

// current returns the ids of the current findings among history.
func (m *currentModel) current(history []store.Finding) map[string]bool {
	out := map[string]bool{}
	for _, f := range history {
		if w, ok := m.winner[keyOfFinding(f)]; ok && w == f.ScanID {
			out[f.ID] = true
		}
	}
	return out
}

func (m *currentModel) delta(id string) string {
	for _, ds := range m.deltas {
		if d, ok := ds[id]; ok {
			return d
		}
	}
	return ""
}

func (m *currentModel) resolvedIDs() []string {
	var out []string
	for _, ids := range m.resolved {
		out = append(out, ids...)
	}
	slices.Sort(out)
	return out
}

// history lists every finding of tenant.
func storedHistory(t *testing.T, s store.Store, tenant string) []store.Finding {
	t.Helper()
	all, _, err := s.ListFindings(ctxT(t), tenant, store.FindingQuery{Sort: []string{"uid"}, Page: store.Page{Size: 1000}})
	must(t, err, "ListFindings, the whole history")
	return all
}

// checkCurrent compares tenant's current state, deltas, first sightings,
// resolved findings and counts with the model's.
func checkCurrent(t *testing.T, s store.Store, tenant, stage string, m *currentModel) {
	t.Helper()
	ctx := ctxT(t)
	all := storedHistory(t, s, tenant)
	want := m.current(all)
	firstSeen := map[string]time.Time{}
	for _, f := range all {
		k := f.ProviderType + "|" + f.ProviderUID + "|" + f.UID
		if t0, ok := firstSeen[k]; !ok || f.Time.Before(t0) {
			firstSeen[k] = f.Time
		}
	}
	byID := map[string]store.Finding{}
	for _, f := range all {
		byID[f.ID] = f
	}
	for _, sort := range []string{"uid", "-severity_id", "check_id", "-time", "inserted_at"} {
		got, total, err := s.ListFindings(ctx, tenant, store.FindingQuery{Latest: true, Sort: []string{sort}, Page: store.Page{Size: 1000}})
		must(t, err, stage+": ListFindings latest")
		gotIDs := ids(got)
		slices.Sort(gotIDs)
		wantIDs := slices.Sorted(maps.Keys(want))
		if !slices.Equal(gotIDs, wantIDs) || total != len(wantIDs) {
			t.Errorf("%s: current state, sort %s: %v (count %d), want %v", stage, sort, uidsOf(byID, gotIDs), total, uidsOf(byID, wantIDs))
			continue
		}
		for _, f := range got {
			if d := m.delta(f.ID); f.Delta != d {
				t.Errorf("%s: %s (scan %s): delta %q, want %q", stage, f.UID, f.ScanID, f.Delta, d)
			}
			w := firstSeen[f.ProviderType+"|"+f.ProviderUID+"|"+f.UID]
			if f.FirstSeenAt == nil || !f.FirstSeenAt.Equal(w) {
				t.Errorf("%s: %s (scan %s): first seen %v, want %v", stage, f.UID, f.ScanID, f.FirstSeenAt, w)
			}
		}
	}
	for _, d := range []string{"new", "changed"} {
		got, total, err := s.ListFindings(ctx, tenant, store.FindingQuery{Latest: true, Delta: d, Sort: []string{"uid"}, Page: store.Page{Size: 1000}})
		must(t, err, stage+": ListFindings delta "+d)
		var wantIDs []string
		for id := range want {
			if m.delta(id) == d {
				wantIDs = append(wantIDs, id)
			}
		}
		slices.Sort(wantIDs)
		gotIDs := ids(got)
		slices.Sort(gotIDs)
		if !slices.Equal(gotIDs, wantIDs) || total != len(wantIDs) {
			t.Errorf("%s: delta %s: %v (count %d), want %v", stage, d, uidsOf(byID, gotIDs), total, uidsOf(byID, wantIDs))
		}
	}
	got, total, err := s.ListFindings(ctx, tenant, store.FindingQuery{Latest: true, Delta: "resolved", Sort: []string{"uid"}, Page: store.Page{Size: 1000}})
	must(t, err, stage+": ListFindings resolved")
	gotIDs := ids(got)
	slices.Sort(gotIDs)
	if wantIDs := m.resolvedIDs(); !slices.Equal(gotIDs, wantIDs) || total != len(wantIDs) {
		t.Errorf("%s: resolved: %v (count %d), want %v", stage, uidsOf(byID, gotIDs), total, uidsOf(byID, wantIDs))
	}
	for _, f := range got {
		if f.Delta != "resolved" {
			t.Errorf("%s: resolved %s: delta %q", stage, f.UID, f.Delta)
		}
	}
	// Counts of the current state, from the summary by scan and by
	// counting (a search), agree with the listing.
	wantCounts := map[string]int{}
	for id := range want {
		f := byID[id]
		wantCounts[f.Severity+"|"+f.StatusCode]++
	}
	for _, q := range []store.FindingQuery{{Latest: true}, {Latest: true, Search: "Title"}} {
		groups, err := s.FindingCounts(ctx, tenant, q, []string{"severity", "status_code"})
		must(t, err, stage+": FindingCounts latest")
		gotCounts := map[string]int{}
		for _, g := range groups {
			gotCounts[strings.Join(g.Values, "|")] = g.Count
		}
		if !maps.Equal(gotCounts, wantCounts) {
			t.Errorf("%s: counts of the current state (search %q): %v, want %v", stage, q.Search, gotCounts, wantCounts)
		}
	}
}

func uidsOf(byID map[string]store.Finding, idList []string) []string {
	out := make([]string, len(idList))
	for i, id := range idList {
		f := byID[id]
		out[i] = f.ScanID + "/" + f.UID
	}
	return out
}

// obs is one finding of a report: its uid, check and status.
type obs struct{ uid, check, status string }

// report makes the findings of one scan of account (aws, puid) at time at.
func report(scan, puid string, at time.Time, os ...obs) []store.Finding {
	out := make([]store.Finding, len(os))
	for i, o := range os {
		f := finding(scan, o.uid)
		f.ProviderUID, f.CheckID, f.StatusCode, f.Time = puid, o.check, o.status, at
		out[i] = f
	}
	return out
}

// uploadRun writes fs as one ingestion of tenant, its scans included, and
// finishes it with status (none: left running).
func uploadRun(t *testing.T, s store.Store, tenant, ing string, status store.RunStatus, fs []store.Finding) {
	t.Helper()
	ctx := ctxT(t)
	must(t, s.StartRun(ctx, tenant, ing, 1, len(fs)), "StartRun "+ing)
	if len(fs) > 0 {
		must(t, s.WriteBatch(ctx, tenant, ing, 1, scanBatch(fs)), "WriteBatch "+ing)
	}
	if status != store.RunRunning {
		must(t, s.FinishRun(ctx, tenant, ing, 1, store.Outcome{Status: status}), "FinishRun "+ing)
	}
}

// scanBatch is a batch of fs with their scans.
func scanBatch(fs []store.Finding) store.Batch {
	b := batchOf(fs...)
	seen := map[string]bool{}
	for _, f := range fs {
		if !seen[f.ScanID] {
			seen[f.ScanID] = true
			b.Scans = append(b.Scans, store.Scan{ID: f.ScanID, ProviderType: f.ProviderType, ProviderUID: f.ProviderUID, Trigger: "imported"})
		}
	}
	return b
}

// testCurrentState pins the current state by account and check against
// the model: a full report, a partial one that replaces only its checks
// (a resource gone from a re-run leaves the current state, and the
// failing ones it passes or drops are resolved), an older report that
// changes nothing, the full one uploaded again, a failed and a running
// ingestion that change nothing, another account and another tenant.
func testCurrentState(t *testing.T, s store.Store) {
	m := newCurrentModel()
	step := func(stage, ing string, status store.RunStatus, fs []store.Finding) {
		t.Helper()
		uploadRun(t, s, tenantA, ing, status, fs)
		if status == store.RunSucceeded {
			scans := map[string]bool{}
			for _, f := range fs {
				scans[f.ScanID] = true
			}
			m.merge(storedHistory(t, s, tenantA), slices.Sorted(maps.Keys(scans))...)
		}
		checkCurrent(t, s, tenantA, stage, m)
	}
	full := report("full", "111", baseTime,
		obs{"u1", "c1", "FAIL"}, obs{"u2", "c1", "PASS"}, obs{"u3", "c2", "FAIL"}, obs{"u4", "c2", "FAIL"}, obs{"u5", "c3", "FAIL"})
	step("a full report", "ing-full", store.RunSucceeded, full)
	step("a partial report", "ing-partial", store.RunSucceeded, report("partial", "111", baseTime.Add(time.Hour),
		obs{"u3", "c2", "PASS"}, obs{"u6", "c2", "FAIL"}))
	step("an older report", "ing-older", store.RunSucceeded, report("older", "111", baseTime.Add(-24*time.Hour),
		obs{"u1", "c1", "PASS"}, obs{"u2", "c1", "PASS"}, obs{"u3", "c2", "FAIL"}, obs{"u5", "c3", "PASS"}))
	step("a newer check run failing again", "ing-next", store.RunSucceeded, report("next", "111", baseTime.Add(2*time.Hour),
		obs{"u3", "c2", "FAIL"}, obs{"u6", "c2", "FAIL"}, obs{"u5", "c3", "PASS"}))
	step("the full report again", "ing-full-again", store.RunSucceeded, full)
	step("a newer report that failed", "ing-failed", store.RunFailed, report("failed", "111", baseTime.Add(3*time.Hour),
		obs{"u1", "c1", "PASS"}))
	step("a newer report still running", "ing-running", store.RunRunning, report("running", "111", baseTime.Add(3*time.Hour),
		obs{"u2", "c1", "FAIL"}))
	step("another account", "ing-222", store.RunSucceeded, report("other", "222", baseTime,
		obs{"u1", "c1", "FAIL"}, obs{"u7", "c2", "PASS"}))
	// Another tenant's reports are its own.
	uploadRun(t, s, tenantB, "ing-b", store.RunSucceeded, report("b", "111", baseTime.Add(5*time.Hour), obs{"u1", "c1", "PASS"}))
	checkCurrent(t, s, tenantA, "after another tenant's report", m)
}

// testCurrentInterleavings runs two ingestions X and Y of one scan and an
// ingestion Z of another scan of the same account and checks, at the same
// time, in every order of their writes and outcomes, each in a tenant of
// its own, and checks the current state against the model after each
// outcome. Z's scan ties X's and Y's on time, so upload order decides:
// the scan last merged wins. Before the merge read the ingestion's own
// record of its scans, X finishing last after Z left Z current.
func testCurrentInterleavings(t *testing.T, s store.Store) {
	type event struct {
		ing    string
		finish bool
	}
	var orders [][]event
	var permute func(done []event, writes, finishes map[string]bool)
	permute = func(done []event, written, finished map[string]bool) {
		if len(done) == 6 {
			orders = append(orders, slices.Clone(done))
			return
		}
		for _, ing := range []string{"X", "Y", "Z"} {
			switch {
			case !written[ing]:
				written[ing] = true
				permute(append(done, event{ing, false}), written, finished)
				written[ing] = false
			case !finished[ing]:
				finished[ing] = true
				permute(append(done, event{ing, true}), written, finished)
				finished[ing] = false
			}
		}
	}
	permute(nil, map[string]bool{}, map[string]bool{})
	ctx := ctxT(t)
	for n, order := range orders {
		tenant := fmt.Sprintf("interleaving-%02d", n)
		m := newCurrentModel()
		reports := map[string][]store.Finding{
			"X": report("s", "111", baseTime, obs{"u1", "c1", "FAIL"}, obs{"u2", "c2", "FAIL"}),
			"Y": report("s", "111", baseTime, obs{"u2", "c2", "PASS"}, obs{"u3", "c2", "FAIL"}),
			"Z": report("z", "111", baseTime, obs{"u1", "c1", "PASS"}, obs{"u3", "c2", "FAIL"}),
		}
		var trace []string
		for _, e := range order {
			if !e.finish {
				trace = append(trace, "write "+e.ing)
				must(t, s.StartRun(ctx, tenant, e.ing, 1, 2), "StartRun")
				must(t, s.WriteBatch(ctx, tenant, e.ing, 1, scanBatch(reports[e.ing])), "WriteBatch")
				continue
			}
			trace = append(trace, "finish "+e.ing)
			must(t, s.FinishRun(ctx, tenant, e.ing, 1, store.Outcome{Status: store.RunSucceeded}), "FinishRun")
			m.merge(storedHistory(t, s, tenant), reports[e.ing][0].ScanID)
			checkCurrent(t, s, tenant, strings.Join(trace, ", "), m)
		}
		if t.Failed() {
			return
		}
	}
}

// testScanAccountRace has two ingestions name one new scan id for two
// accounts while both run: the second write is refused, whether it
// waits on the first's (PostgreSQL) or follows it (SQLite).
func testScanAccountRace(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, ing := range []string{"ing-111", "ing-222"} {
		must(t, s.StartRun(ctx, tenantA, ing, 1, 1), "StartRun "+ing)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, acct := range []string{"111", "222"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.WriteBatch(ctx, tenantA, "ing-"+acct, 1, scanBatch(report("shared-scan", acct, baseTime, obs{"u-" + acct, "c1", "FAIL"})))
		}()
	}
	wg.Wait()
	refused := 0
	for _, err := range errs {
		switch {
		case errors.Is(err, store.ErrScanAccount):
			refused++
		case err != nil:
			t.Fatalf("WriteBatch: %v, want nil or ErrScanAccount", err)
		}
	}
	if refused != 1 {
		t.Fatalf("two ingestions wrote one new scan for two accounts: %d refused (%v), want 1", refused, errs)
	}
	all := storedHistory(t, s, tenantA)
	if len(all) != 1 {
		t.Errorf("findings after the refused write: %v, want the first account's only", uids(all))
	}
}
