package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// testMuteRules pins the mute rules: a rule's pass marks the stored
// findings it matches, batch by batch; new ingestions are marked by the
// active rules as they are written; the current state's lists and counts
// leave muted findings out, or keep only them, as FindingQuery.Muted
// says; a rule changed, expired or deleted takes its marks back; another
// tenant is untouched.
func testMuteRules(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ingest := func(tenant, ing, scan string) {
		t.Helper()
		var fs []store.Finding
		for i := range 10 {
			f := finding(scan, fmt.Sprintf("u-%d", i))
			f.CheckID = fmt.Sprintf("ec2_open_%d", i)
			if i < 4 {
				f.CheckID = fmt.Sprintf("s3_public_%d", i)
			}
			if i%2 == 1 {
				f.Severity, f.SeverityID = "low", 2
			}
			f.Raw = []byte(fmt.Sprintf(`{"resources":[{"name":"res-%d"}]}`, i))
			fs = append(fs, f)
		}
		must(t, s.StartRun(ctx, tenant, ing, 1, len(fs)), "StartRun "+ing)
		b := batchOf(fs...)
		b.Scans = []store.Scan{{ID: scan, ProviderType: "aws", ProviderUID: "123456789012", Trigger: "imported"}}
		must(t, s.WriteBatch(ctx, tenant, ing, 1, b), "WriteBatch "+ing)
		must(t, s.FinishRun(ctx, tenant, ing, 1, store.Outcome{Status: store.RunSucceeded}), "FinishRun "+ing)
	}
	// list returns the uids (scan/uid) of q's findings with their marks,
	// checking that the count agrees with the rows.
	list := func(tenant string, q store.FindingQuery) []string {
		t.Helper()
		q.Page, q.Sort = store.Page{Size: 100}, []string{"uid"}
		got, total, err := s.ListFindings(ctx, tenant, q)
		must(t, err, fmt.Sprintf("ListFindings(%+v)", q))
		if total != len(got) {
			t.Errorf("ListFindings(%+v): count %d, but %d rows", q, total, len(got))
		}
		var out []string
		for _, f := range got {
			v := f.ScanID + "/" + f.UID
			if f.Mute != nil {
				v += " muted by " + f.Mute.Rule + ": " + f.Mute.Reason
			}
			out = append(out, v)
		}
		return out
	}
	// counts checks FindingCounts by severity against the listing.
	counts := func(tenant string, q store.FindingQuery) {
		t.Helper()
		q.Page, q.Sort = store.Page{Size: 100}, []string{"uid"}
		rows, _, err := s.ListFindings(ctx, tenant, q)
		must(t, err, "ListFindings")
		want := map[string]int{}
		for _, f := range rows {
			want[f.Severity]++
		}
		groups, err := s.FindingCounts(ctx, tenant, q, []string{"severity"})
		must(t, err, fmt.Sprintf("FindingCounts(%+v)", q))
		got := map[string]int{}
		for _, g := range groups {
			got[g.Values[0]] = g.Count
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("FindingCounts(%+v) by severity = %v, want %v (from the listing)", q, got, want)
		}
	}
	apply := func(tenant, name string, batch int) store.MuteProgress {
		t.Helper()
		var p store.MuteProgress
		for steps := 0; !p.Done; steps++ {
			if steps > 100 {
				t.Fatalf("the pass of %s never ended: %+v", name, p)
			}
			var err error
			p, err = s.ApplyMuteRule(ctx, tenant, name, batch)
			must(t, err, "ApplyMuteRule "+name)
		}
		return p
	}
	uids := func(prefix string, is ...int) []string {
		var out []string
		for _, i := range is {
			out = append(out, fmt.Sprintf("%s/u-%d", prefix, i))
		}
		return out
	}
	mutedAs := func(rule, reason string, in []string) []string {
		out := slices.Clone(in)
		for i := range out {
			out[i] += " muted by " + rule + ": " + reason
		}
		return out
	}
	expect := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", what, got, want)
		}
	}
	latest := func(muted string) store.FindingQuery { return store.FindingQuery{Latest: true, Muted: muted} }

	ingest(tenantA, "ing-1", "s1")
	ingest(tenantB, "ing-1", "s1")

	// A rule is stored, then its pass marks the stored findings.
	s3 := store.MuteRule{Name: "s3-public", Generation: 1, Reason: "public by design", Match: store.MuteMatch{CheckID: "s3_*"}}
	must(t, s.PutMuteRule(ctx, tenantA, s3), "PutMuteRule")
	expect("before the pass, nothing is muted", list(tenantA, latest(store.MutedOnly)), nil)
	p := apply(tenantA, "s3-public", 3)
	if p.Scanned != 10 || p.Matched != 4 || p.Generation != 1 {
		t.Errorf("the pass ended at %+v, want 10 scanned, 4 matched, generation 1", p)
	}
	// The same generation again changes nothing, its pass stays done.
	must(t, s.PutMuteRule(ctx, tenantA, s3), "PutMuteRule again")
	if p, err := s.ApplyMuteRule(ctx, tenantA, "s3-public", 3); err != nil || !p.Done || p.Matched != 4 {
		t.Errorf("ApplyMuteRule after the same generation again = %+v, %v; want done, 4 matched", p, err)
	}

	s3Muted := mutedAs("s3-public", "public by design", uids("s1", 0, 1, 2, 3))
	expect("muted only", list(tenantA, latest(store.MutedOnly)), s3Muted)
	expect("muted left out", list(tenantA, latest(store.MutedExcluded)), uids("s1", 4, 5, 6, 7, 8, 9))
	expect("muted or not", list(tenantA, latest(store.MutedAny)), append(slices.Clone(s3Muted), uids("s1", 4, 5, 6, 7, 8, 9)...))
	expect("the history shows the marks", list(tenantA, store.FindingQuery{}), append(slices.Clone(s3Muted), uids("s1", 4, 5, 6, 7, 8, 9)...))
	expect("a filter within the muted ones", list(tenantA, store.FindingQuery{Latest: true, Muted: store.MutedOnly, Severity: []string{"low"}}),
		mutedAs("s3-public", "public by design", uids("s1", 1, 3)))
	expect("a search leaves the muted out", list(tenantA, store.FindingQuery{Latest: true, Muted: store.MutedExcluded, Search: "Title of u-"}),
		uids("s1", 4, 5, 6, 7, 8, 9))
	for _, q := range []store.FindingQuery{
		latest(store.MutedOnly), latest(store.MutedExcluded), latest(store.MutedAny),
		{Muted: store.MutedExcluded}, {Muted: store.MutedOnly}, {Muted: store.MutedExcluded, Severity: []string{"high"}},
		{Latest: true, Muted: store.MutedExcluded, Search: "Title of u-"}, {ScanID: "s1", Muted: store.MutedExcluded},
	} {
		counts(tenantA, q)
	}
	f, err := s.GetFinding(ctx, tenantA, store.FindingID(tenantA, "s1", "u-2"))
	must(t, err, "GetFinding")
	if f.Mute == nil || f.Mute.Rule != "s3-public" || f.Mute.Reason != "public by design" {
		t.Errorf("GetFinding of a muted finding: mark %+v, want s3-public's", f.Mute)
	}
	if f, err := s.GetFinding(ctx, tenantA, store.FindingID(tenantA, "s1", "u-5")); err != nil || f.Mute != nil {
		t.Errorf("GetFinding of a finding no rule matches: mark %+v, %v; want none", f.Mute, err)
	}

	// Another tenant is untouched, and cannot step another's rule.
	expect("another tenant's muted", list(tenantB, latest(store.MutedOnly)), nil)
	expect("another tenant's findings", list(tenantB, latest(store.MutedExcluded)), uids("s1", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9))
	if _, err := s.ApplyMuteRule(ctx, tenantB, "s3-public", 10); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ApplyMuteRule of another tenant's rule: %v, want not found", err)
	}

	// A new ingestion is marked as it is written, by the active rules only.
	past := time.Now().Add(-time.Hour)
	must(t, s.PutMuteRule(ctx, tenantA, store.MuteRule{Name: "expired", Generation: 1, Reason: "was temporary", ExpiresAt: &past,
		Match: store.MuteMatch{Severity: []string{"low"}}}), "PutMuteRule expired")
	ingest(tenantA, "ing-2", "s2")
	expect("a new ingestion is marked", list(tenantA, latest(store.MutedOnly)), mutedAs("s3-public", "public by design", uids("s2", 0, 1, 2, 3)))
	counts(tenantA, latest(store.MutedExcluded))
	must(t, s.DeleteMuteRule(ctx, tenantA, "expired"), "DeleteMuteRule expired")

	// A changed rule loses its marks and marks again as its pass goes.
	// Globs: a resource's name and uid.
	s3.Generation, s3.Reason = 2, "accepted risk"
	s3.Match = store.MuteMatch{ResourceName: "res-[5-7]", ResourceUID: "arn:aws:s3:::u-*", Severity: []string{"LOW"}}
	must(t, s.PutMuteRule(ctx, tenantA, s3), "PutMuteRule generation 2")
	expect("a changed rule, before its pass", list(tenantA, store.FindingQuery{Muted: store.MutedOnly}), nil)
	p = apply(tenantA, "s3-public", 7)
	if p.Scanned != 20 || p.Matched != 4 || p.Generation != 2 {
		t.Errorf("the second pass ended at %+v, want 20 scanned, 4 matched, generation 2", p)
	}
	history := list(tenantA, store.FindingQuery{Muted: store.MutedOnly})
	slices.Sort(history) // by uid, two scans tie
	expect("the changed rule's marks", history, mutedAs("s3-public", "accepted risk", append(uids("s1", 5, 7), uids("s2", 5, 7)...)))

	// Two rules on one finding: the first by name is shown, and it stays
	// muted until both are gone.
	must(t, s.PutMuteRule(ctx, tenantA, store.MuteRule{Name: "a-low", Generation: 1, Reason: "low noise", Match: store.MuteMatch{Severity: []string{"low"}}}), "PutMuteRule a-low")
	apply(tenantA, "a-low", 100)
	expect("two rules", list(tenantA, latest(store.MutedOnly)), mutedAs("a-low", "low noise", uids("s2", 1, 3, 5, 7, 9)))
	counts(tenantA, latest(store.MutedExcluded))
	must(t, s.DeleteMuteRule(ctx, tenantA, "a-low"), "DeleteMuteRule a-low")
	expect("one rule deleted", list(tenantA, latest(store.MutedOnly)), mutedAs("s3-public", "accepted risk", uids("s2", 5, 7)))

	// Deleting the rule removes its marks.
	must(t, s.DeleteMuteRule(ctx, tenantA, "s3-public"), "DeleteMuteRule")
	must(t, s.DeleteMuteRule(ctx, tenantA, "s3-public"), "DeleteMuteRule of a rule gone")
	expect("after delete, nothing muted", list(tenantA, store.FindingQuery{Muted: store.MutedOnly}), nil)
	expect("after delete, every finding", list(tenantA, latest(store.MutedExcluded)), uids("s2", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9))
	counts(tenantA, latest(store.MutedExcluded))

	// A tenant's deletion takes its rules.
	must(t, s.PutMuteRule(ctx, tenantA, s3), "PutMuteRule before the tenant's deletion")
	must(t, s.DeleteTenantData(ctx, tenantA), "DeleteTenantData")
	if _, err := s.ApplyMuteRule(ctx, tenantA, "s3-public", 10); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ApplyMuteRule after the tenant's deletion: %v, want not found", err)
	}
	// A rule that matches nothing is refused.
	if err := s.PutMuteRule(ctx, tenantB, store.MuteRule{Name: "all", Generation: 1, Reason: "x"}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("PutMuteRule of a rule without a match: %v, want an invalid argument", err)
	}
}
