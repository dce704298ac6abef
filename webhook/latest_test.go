package webhook_test

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/apitest"
)

// TestLatestFindings uploads reports of one account through the real API
// and worker and reads GET /findings/latest and /findings/latest/counts
// after each: for each check, the findings of its newest run (the
// records' time, then upload order), so a smaller report replaces only
// the checks it holds, while GET /findings keeps the whole history. A cursor does not cross
// from one list to the other, and a search shorter than a trigram is
// refused on every findings read.
func TestLatestFindings(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	a := newAPI(t, env)

	full := fixture(t, "aws_3_records.ocsf.json")
	var records []json.RawMessage
	if err := json.Unmarshal(full, &records); err != nil {
		t.Fatal(err)
	}
	// Another report of the same account: its scan id is derived from the
	// report's content, so it is another scan.
	fewer, err := json.Marshal(records[:2])
	if err != nil {
		t.Fatal(err)
	}
	uids := func(d listDoc) []string {
		var out []string
		for _, r := range d.Data {
			out = append(out, r.Attributes["uid"].(string)+"@"+r.Attributes["scan_id"].(string))
		}
		slices.Sort(out)
		return out
	}
	total := func(path string) int {
		var d countsDoc
		decode(t, a.get(path, "group_by=severity"), &d)
		return d.Meta.Total
	}

	for i, step := range []struct {
		name               string
		report             []byte
		latest, all, scans int
	}{
		{"first report", full, 3, 3, 1},
		// The third record's check keeps the first report's run.
		{"a smaller report of the same account", fewer, 3, 5, 2},
		{"the first report again", full, 3, 5, 1},
	} {
		if _, status, _ := a.ingest(step.name+".ocsf.json", step.report); status != "completed" {
			t.Fatalf("step %d: ingestion %s", i, status)
		}
		latest := a.list("/api/v1/findings/latest", "page[size]=100")
		all := a.list("/api/v1/findings", "page[size]=100")
		if latest.Meta.Pagination.Count != step.latest || len(latest.Data) != step.latest || all.Meta.Pagination.Count != step.all {
			t.Fatalf("after %s: latest %d (%d listed), all %d; want latest %d, all %d", step.name,
				latest.Meta.Pagination.Count, len(latest.Data), all.Meta.Pagination.Count, step.latest, step.all)
		}
		scans := map[string]bool{}
		for _, r := range latest.Data {
			scans[r.Attributes["scan_id"].(string)] = true
		}
		if len(scans) != step.scans {
			t.Errorf("after %s: the latest findings come from scans %v, want %d", step.name, scans, step.scans)
		}
		if n := total("/api/v1/findings/latest/counts"); n != step.latest {
			t.Errorf("after %s: latest counts total %d, want %d", step.name, n, step.latest)
		}
		if n := total("/api/v1/findings/counts"); n != step.all {
			t.Errorf("after %s: counts total %d, want %d", step.name, n, step.all)
		}
		if i == 0 {
			if !slices.Equal(uids(latest), uids(all)) {
				t.Errorf("after the first report: latest %v, all %v", uids(latest), uids(all))
			}
		}
	}

	// Filters, sort and cursor pages work on the latest list as on the
	// whole one.
	first := a.list("/api/v1/findings/latest", "page[size]=2&sort=uid")
	if first.Links.Next == nil || first.Meta.Pagination.Count != 3 {
		t.Fatalf("latest, 2 per page: count %d, next %v", first.Meta.Pagination.Count, first.Links.Next)
	}
	next, err := url.Parse(*first.Links.Next)
	if err != nil || next.Path != "/api/v1/findings/latest" {
		t.Fatalf("links.next %q does not continue the latest list", *first.Links.Next)
	}
	second := a.list(next.Path, next.RawQuery)
	if got := append(first.ids(), second.ids()...); len(got) != 3 || second.Links.Next != nil ||
		!slices.Equal(got, a.list("/api/v1/findings/latest", "page[size]=3&sort=uid").ids()) {
		t.Fatalf("latest cursor pages %v", got)
	}
	cursor := next.Query().Get("page[cursor]")
	wantError(t, a.get("/api/v1/findings", "page[size]=2&sort=uid&page[cursor]="+url.QueryEscape(cursor)), 400, "invalid", "parameter:page[cursor]")
	allNext := a.list("/api/v1/findings", "page[size]=2&sort=uid").Links.Next
	u, err := url.Parse(*allNext)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, a.get("/api/v1/findings/latest", u.RawQuery), 400, "invalid", "parameter:page[cursor]")

	for _, path := range []string{"/api/v1/findings", "/api/v1/findings/latest"} {
		for _, term := range []string{"s3", "é", "ab"} {
			wantError(t, a.get(path, "filter[search]="+url.QueryEscape(term)), 400, "invalid", "parameter:filter[search]", "at least 3 characters")
		}
		wantError(t, a.get(path+"/counts", "group_by=severity&filter[search]=s3"), 400, "invalid", "parameter:filter[search]", "at least 3 characters")
		// The search finds what a substring test over the list finds.
		var want []string
		for _, r := range a.list(path, "page[size]=100&sort=uid").Data {
			for _, attr := range []string{"uid", "title", "check_id", "resource_uid"} {
				if strings.Contains(strings.ToLower(r.Attributes[attr].(string)), "s3_") {
					want = append(want, r.ID)
					break
				}
			}
		}
		if got := a.list(path, "filter[search]=S3_&page[size]=100&sort=uid").ids(); len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("GET %s?filter[search]=S3_: %v, want %v", path, got, want)
		}
	}
}
