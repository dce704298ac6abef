package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/posture-dev/posture/internal/store"
)

// testSearchSemantics pins what FindingQuery.Search means on every engine,
// whichever index answers it: a substring of one of the four searched
// columns, ASCII letters in any case, every other character as written
// (LIKE's wildcards and escape, FTS5's quote and operators included), never
// a match that spans two columns. A text longer than the probe the index
// looks up (engine.SearchProbeLength characters, its end) is matched
// whole: the texts that share its end but differ earlier must not show.
// Each term is also searched after the findings were rewritten with new
// text, so an index that kept the old text shows.
func testSearchSemantics(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	texts := []struct{ uid, title, check, resource string }{
		{"f-pct", `100% encrypted`, "c-pct", "r-1"},
		{"f-und", "snake_case name", "c-und", "r-2"},
		{"f-bsl", `C:\Temp\logs`, "c-bsl", "r-3"},
		{"f-quo", `say "hi" AND NOT bye*`, "c-quo", "r-4"},
		{"f-uni", "Zugriff über Port 22 auf Straße", "c-uni", "arn:日本語:bucket"},
		{"f-mix", "MiXeD CaSe Bucket", "S3_Bucket_Public", "arn:aws:s3:::Logs"},
		{"f-gap", "ends with abc", "c-gap", "defstart"},
		// Long texts that share their last characters, the probe of a
		// long search, and differ before them.
		{"f-arn1", "Role grants read access", "c-arn1", "arn:aws:iam::111111111111:role/ReadOnlyAccess"},
		{"f-arn2", "Role grants read access", "c-arn2", "arn:aws:iam::222222222222:role/ReadOnlyAccess"},
		{"f-wild", "50%_off the shared sale ending", "c-wild", "r-5"},
		{"f-tame", "50x0off the shared sale ending", "c-tame", "r-6"},
	}
	var fs []store.Finding
	for _, x := range texts {
		f := finding("scan-1", x.uid)
		f.Title, f.CheckID, f.ResourceUID = x.title, x.check, x.resource
		fs = append(fs, f)
	}
	must(t, s.StartRun(ctx, tenantA, "ing-1", 1, len(fs)), "StartRun")
	must(t, s.WriteBatch(ctx, tenantA, "ing-1", 1, batchOf(fs...)), "WriteBatch")
	// The same text in another tenant must never show.
	must(t, s.StartRun(ctx, tenantB, "ing-1", 1, len(fs)), "StartRun tenant B")
	must(t, s.WriteBatch(ctx, tenantB, "ing-1", 1, batchOf(fs...)), "WriteBatch tenant B")

	cases := []struct {
		term string
		want []string
	}{
		{"0% e", []string{"f-pct"}},
		{"100%", []string{"f-pct"}},
		{"%%%", nil}, // % is no wildcard
		{"e_c", []string{"f-und"}},
		{"e?c", nil},
		{"___", nil}, // _ is no wildcard
		{`:\te`, []string{"f-bsl"}},
		{`\Temp\`, []string{"f-bsl"}},
		{`\\T`, nil}, // \ is no escape either
		{`"hi"`, []string{"f-quo"}},
		{`hi" AND`, []string{"f-quo"}},
		{"AND NOT", []string{"f-quo"}}, // no query operators
		{"bye*", []string{"f-quo"}},
		{"bye*x", nil},
		{"über Port", []string{"f-uni"}},
		{"über port", []string{"f-uni"}}, // ASCII letters fold
		{"straße", []string{"f-uni"}},
		{"日本語", []string{"f-uni"}},
		{"本語:b", []string{"f-uni"}},
		{"mixed case", []string{"f-mix"}},
		{"S3_BUCKET", []string{"f-mix"}},
		{"s3_bucket_public", []string{"f-mix"}},
		{"S3:::LOGS", []string{"f-mix"}},
		{"F-MIX", []string{"f-mix"}},
		{"bucket", []string{"f-mix", "f-uni"}},
		{"abcdef", nil}, // the end of title and the start of resource_uid: two columns
		{"abc", []string{"f-gap"}},
		{"with abc", []string{"f-gap"}},
		// Longer than the probe: the probe finds candidates, the whole
		// text decides, with the same rules for case and wildcards.
		{"OnlyAccess", []string{"f-arn1", "f-arn2"}},
		{"arn:aws:iam::111111111111:role/ReadOnlyAccess", []string{"f-arn1"}},
		{"ARN:AWS:IAM::222222222222:ROLE/readonlyaccess", []string{"f-arn2"}},
		{"arn:aws:iam::333333333333:role/ReadOnlyAccess", nil},
		{"111111111111:role/ReadOnly", []string{"f-arn1"}},
		{"Role grants role/ReadOnlyAccess", nil}, // title, then resource_uid: two columns
		{"read access", []string{"f-arn1", "f-arn2"}},
		{"50%_off the shared sale ending", []string{"f-wild"}}, // % and _ are no wildcards before the probe either
		{"50x0off the shared sale ending", []string{"f-tame"}},
		{"5_%_off the shared sale ending", nil},
		{`c:\temp\logs`, []string{"f-bsl"}},
		{`D:\Temp\logs`, nil},
		{"zugriff über port 22 auf Straße", []string{"f-uni"}},
		{"Zugriff unter Port 22 auf Straße", nil},
		{`say "hi" AND NOT bye*`, []string{"f-quo"}},
		{`say "ho" AND NOT bye*`, nil},
		// Shorter than a trigram: still exact, without the index.
		{"%", []string{"f-pct", "f-wild"}},
		{"_", []string{"f-mix", "f-und", "f-wild"}},
		{"ß", []string{"f-uni"}},
		{"S3", []string{"f-mix"}},
		{`\`, []string{"f-bsl"}},
	}
	check := func(stage string) {
		t.Helper()
		for _, tc := range cases {
			got := expectSearch(t, s, tenantA, tc.term)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: search %q: got %v, want %v", stage, tc.term, got, tc.want)
			}
		}
	}
	check("after the first write")

	// Rewrite every finding with other text, then back: the index must
	// follow each write of the row, not only its insert.
	moved := slices.Clone(fs)
	for i := range moved {
		moved[i].Title, moved[i].CheckID, moved[i].ResourceUID = fmt.Sprintf("renamed %d", i), fmt.Sprintf("renamed_%d", i), "r"
	}
	must(t, s.StartRun(ctx, tenantA, "ing-2", 1, len(moved)), "StartRun ing-2")
	must(t, s.WriteBatch(ctx, tenantA, "ing-2", 1, batchOf(moved...)), "WriteBatch ing-2")
	for _, term := range []string{"bucket", "100%", "über Port", "arn:aws:iam::111111111111:role/ReadOnlyAccess", "renamed"} {
		got := expectSearch(t, s, tenantA, term)
		var want []string
		if term == "renamed" {
			for _, x := range texts {
				want = append(want, x.uid)
			}
			slices.Sort(want)
		}
		if !slices.Equal(got, want) {
			t.Errorf("after a rewrite: search %q: got %v, want %v", term, got, want)
		}
	}
	must(t, s.StartRun(ctx, tenantA, "ing-3", 1, len(fs)), "StartRun ing-3")
	must(t, s.WriteBatch(ctx, tenantA, "ing-3", 1, batchOf(fs...)), "WriteBatch ing-3")
	check("after writing the text back")
}

// expectSearch lists the uids of tenant's findings matching term, in uid
// order, checking that the count agrees with the rows.
func expectSearch(t *testing.T, s store.Store, tenant, term string) []string {
	t.Helper()
	got, total, err := s.ListFindings(ctxT(t), tenant, store.FindingQuery{Search: term, Sort: []string{"uid"}, Page: store.Page{Size: 100}})
	must(t, err, fmt.Sprintf("ListFindings(search %q)", term))
	if total != len(got) {
		t.Errorf("search %q: total %d, but %d rows", term, total, len(got))
	}
	var out []string
	for _, f := range got {
		out = append(out, f.UID)
	}
	return out
}
