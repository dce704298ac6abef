package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/store"
)

// TestOverviewAndCatalogueRequests runs the overview and check catalogue
// tools against a real API behind a proxy that counts the requests they
// make: whatever the number of findings, severities and accounts, an
// overview costs at most 3 API requests and a catalogue 1, and both answer
// the exact counts. The overview and the search count the current state
// (each account's newest run of each check) unless asked for history.
func TestOverviewAndCatalogueRequests(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	ctx := context.Background()

	// 400 findings over 4 accounts, 5 severities, 3 results, 7 checks.
	sevs := []string{"critical", "high", "medium", "low", "informational"}
	codes := []string{"FAIL", "PASS", "MANUAL"}
	accounts := [][2]string{{"aws", "111111111111"}, {"aws", "222222222222"}, {"gcp", "project-x"}, {"azure", "sub-1"}}
	var fs []store.Finding
	for i := range 400 {
		acct := accounts[i%4]
		fs = append(fs, store.Finding{UID: fmt.Sprintf("f-%d", i), ScanID: "scan-" + acct[1], CheckID: fmt.Sprintf("check_%d", i%7),
			Severity: sevs[i%5], SeverityID: 5 - i%5, StatusCode: codes[i%3], ProviderType: acct[0], ProviderUID: acct[1],
			Time: time.Now(), Raw: []byte(`{}`)})
	}
	// An earlier scan of each account, of the same checks a day before,
	// which the scans above replace: history the overview leaves out by
	// default.
	var earlier []store.Finding
	for i := range 100 {
		acct := accounts[i%4]
		earlier = append(earlier, store.Finding{UID: fmt.Sprintf("old-%d", i), ScanID: "old-scan-" + acct[1], CheckID: fmt.Sprintf("check_%d", i%7),
			Severity: "critical", SeverityID: 5, StatusCode: "FAIL", ProviderType: acct[0], ProviderUID: acct[1],
			Time: time.Now().Add(-24 * time.Hour), Raw: []byte(`{}`)})
	}
	for _, ing := range []struct {
		id, scanPrefix string
		fs             []store.Finding
	}{{"earlier", "old-scan-", earlier}, {"seed", "scan-", fs}} {
		b := store.Batch{Findings: ing.fs}
		for _, acct := range accounts {
			b.Scans = append(b.Scans, store.Scan{ID: ing.scanPrefix + acct[1], ProviderType: acct[0], ProviderUID: acct[1], Trigger: "imported"})
		}
		if err := env.Store.StartRun(ctx, env.Tenant, ing.id, 1, len(ing.fs)); err != nil {
			t.Fatal(err)
		}
		if err := env.Store.WriteBatch(ctx, env.Tenant, ing.id, 1, b); err != nil {
			t.Fatal(err)
		}
		if err := env.Store.FinishRun(ctx, env.Tenant, ing.id, 1, store.Outcome{Status: store.RunSucceeded}); err != nil {
			t.Fatal(err)
		}
	}

	var requests atomic.Int64
	target, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	defer counted.Close()

	cs := inMemoryClient(t, counted.URL, env.APIKey)

	call := func(t *testing.T, name string, args map[string]any, out any) int64 {
		t.Helper()
		before := requests.Load()
		res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		if err := json.Unmarshal([]byte(res.Content[0].(*mcpsdk.TextContent).Text), out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return requests.Load() - before
	}

	type account struct {
		ProviderType string `json:"provider_type"`
		ProviderUID  string `json:"provider_uid"`
		Findings     int    `json:"findings"`
		Failing      int    `json:"failing"`
	}
	type overview struct {
		Total      int            `json:"total_findings"`
		BySeverity map[string]int `json:"by_severity"`
		ByStatus   map[string]int `json:"by_status_code"`
		Failing    map[string]int `json:"failing_by_severity"`
		Providers  []account      `json:"by_provider"`
	}
	all := append(slices.Clone(earlier), fs...)
	want := func(from []store.Finding, keep func(store.Finding) bool) overview {
		o := overview{BySeverity: map[string]int{}, ByStatus: map[string]int{"FAIL": 0, "PASS": 0, "MANUAL": 0}, Failing: map[string]int{}}
		idx := map[string]int{}
		for _, f := range from {
			if !keep(f) {
				continue
			}
			o.Total++
			o.BySeverity[f.Severity]++
			o.ByStatus[f.StatusCode]++
			k := f.ProviderType + "/" + f.ProviderUID
			if _, ok := idx[k]; !ok {
				idx[k] = len(o.Providers)
				o.Providers = append(o.Providers, account{ProviderType: f.ProviderType, ProviderUID: f.ProviderUID})
			}
			o.Providers[idx[k]].Findings++
			if f.StatusCode == "FAIL" {
				o.Failing[f.Severity]++
				o.Providers[idx[k]].Failing++
			}
		}
		return o
	}
	byKey := func(ps []account) map[string]account {
		m := map[string]account{}
		for _, p := range ps {
			m[p.ProviderType+"/"+p.ProviderUID] = p
		}
		return m
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		from []store.Finding
		keep func(store.Finding) bool
	}{
		{"whole tenant", nil, fs, func(store.Finding) bool { return true }},
		{"one provider type", map[string]any{"provider_type": "AWS"}, fs, func(f store.Finding) bool { return f.ProviderType == "aws" }},
		{"one account", map[string]any{"provider_uid": "project-x"}, fs, func(f store.Finding) bool { return f.ProviderUID == "project-x" }},
		{"one check", map[string]any{"check_id": "check_3"}, fs, func(f store.Finding) bool { return f.CheckID == "check_3" }},
		{"history", map[string]any{"history": true}, all, func(store.Finding) bool { return true }},
		{"history of one account", map[string]any{"history": true, "provider_uid": "sub-1"}, all, func(f store.Finding) bool { return f.ProviderUID == "sub-1" }},
		{"an earlier scan", map[string]any{"scan": "old-scan-project-x"}, all, func(f store.Finding) bool { return f.ScanID == "old-scan-project-x" }},
	} {
		t.Run("overview of "+tc.name, func(t *testing.T) {
			var got overview
			n := call(t, "get_findings_overview", tc.args, &got)
			t.Logf("%d API requests", n)
			if n > 3 {
				t.Errorf("the overview made %d API requests; at most 3 are allowed", n)
			}
			w := want(tc.from, tc.keep)
			if got.Total != w.Total || !reflect.DeepEqual(got.BySeverity, w.BySeverity) || !reflect.DeepEqual(got.ByStatus, w.ByStatus) ||
				!reflect.DeepEqual(got.Failing, w.Failing) || !reflect.DeepEqual(byKey(got.Providers), byKey(w.Providers)) {
				t.Errorf("overview:\n got %+v\nwant %+v", got, w)
			}
		})
	}

	t.Run("search continues by cursor", func(t *testing.T) {
		type page struct {
			Items []struct {
				UID string `json:"uid"`
			} `json:"items"`
			Page       int    `json:"page"`
			NextPage   *int   `json:"next_page"`
			NextCursor string `json:"next_cursor"`
		}
		seen := map[string]bool{}
		args := map[string]any{"page_size": 60, "status_code": []string{"FAIL"}}
		var p page
		for i := 0; ; i++ {
			call(t, "search_findings", args, &p)
			for _, it := range p.Items {
				seen[it.UID] = true
			}
			if i > 0 && (p.Page != 0 || p.NextPage != nil) {
				t.Fatalf("a cursor page claims page %d, next page %v", p.Page, p.NextPage)
			}
			if p.NextCursor == "" || i > 10 {
				break
			}
			args = map[string]any{"page_size": 60, "status_code": []string{"FAIL"}, "cursor": p.NextCursor}
		}
		want := 0
		for _, f := range fs {
			if f.StatusCode == "FAIL" {
				want++
				if !seen[f.UID] {
					t.Errorf("%s was never listed", f.UID)
				}
			}
		}
		if len(seen) != want {
			t.Errorf("listed %d failing findings, want %d", len(seen), want)
		}
	})

	t.Run("search reads the latest scans unless asked for history", func(t *testing.T) {
		var p struct {
			Items []struct {
				UID    string `json:"uid"`
				ScanID string `json:"scan_id"`
			} `json:"items"`
			Count      int   `json:"count"`
			LowerBound *bool `json:"count_is_lower_bound"`
		}
		for _, tc := range []struct {
			args         map[string]any
			count, items int
			lowerBound   bool
		}{
			{map[string]any{"search": "old-", "page_size": 100}, 0, 0, false},
			{map[string]any{"search": "old-", "page_size": 100, "history": true}, len(earlier), len(earlier), false},
			{map[string]any{"scan": "old-scan-sub-1", "page_size": 100}, len(earlier) / 4, len(earlier) / 4, false},
			{map[string]any{"search": "f-1", "page_size": 100}, 111, 100, false}, // f-1, f-10..19, f-100..199
			// A search counts to the end of the next page: 21 of the 111.
			{map[string]any{"search": "f-1", "page_size": 10}, 21, 10, true},
			{map[string]any{"search": "f-1", "page_size": 10, "page": 5}, 61, 10, true},
		} {
			p.Items, p.Count, p.LowerBound = nil, 0, nil
			call(t, "search_findings", tc.args, &p)
			if p.Count != tc.count || len(p.Items) != tc.items {
				t.Errorf("search_findings %v: %d items of %d, want %d of %d", tc.args, len(p.Items), p.Count, tc.items, tc.count)
			}
			if p.LowerBound == nil || *p.LowerBound != tc.lowerBound {
				t.Errorf("search_findings %v: count_is_lower_bound %v, want %v", tc.args, p.LowerBound, tc.lowerBound)
			}
		}
	})

	// The catalogue counts what search_findings finds with the same
	// history: the current state by default.
	t.Run("check catalogue", func(t *testing.T) {
		type catalogue struct {
			Checks []struct {
				CheckID  string `json:"check_id"`
				Findings int    `json:"findings"`
				Failing  int    `json:"failing"`
			} `json:"checks"`
			Matched  int    `json:"findings_matched"`
			Complete bool   `json:"complete"`
			Scans    string `json:"scans"`
		}
		for _, tc := range []struct {
			args  map[string]any
			from  []store.Finding
			scans string
		}{
			{map[string]any{"provider_type": "aws"}, fs, "current state (each account's newest run of each check)"},
			{map[string]any{"provider_type": "aws", "history": true}, all, "all"},
			{map[string]any{"provider_type": "aws", "scan": "old-scan-111111111111"}, earlier, "all"},
		} {
			var got catalogue
			if n := call(t, "list_check_ids", tc.args, &got); n > 1 {
				t.Errorf("%v: the catalogue made %d API requests; want 1", tc.args, n)
			}
			want := map[string][2]int{}
			total := 0
			for _, f := range tc.from {
				if f.ProviderType != "aws" || (tc.args["scan"] != nil && f.ScanID != tc.args["scan"]) {
					continue
				}
				c := want[f.CheckID]
				c[0]++
				if f.StatusCode == "FAIL" {
					c[1]++
				}
				want[f.CheckID] = c
				total++
			}
			gotMap := map[string][2]int{}
			for _, c := range got.Checks {
				gotMap[c.CheckID] = [2]int{c.Findings, c.Failing}
			}
			if !reflect.DeepEqual(gotMap, want) || got.Matched != total || !got.Complete || got.Scans != tc.scans {
				t.Errorf("%v: catalogue %+v; want %v of %d findings, complete, scans %q", tc.args, got, want, total, tc.scans)
			}
		}
	})

	// A search the API counts only in part: more than 1,000 matches. The
	// catalogue says so, and its counts stay within the truth.
	t.Run("check catalogue of a common search", func(t *testing.T) {
		var bulk []store.Finding
		for i := range 1100 {
			bulk = append(bulk, store.Finding{UID: fmt.Sprintf("bulk-%d", i), ScanID: "bulk-scan", CheckID: fmt.Sprintf("bulk_check_%d", i%3),
				Severity: "low", SeverityID: 2, StatusCode: codes[i%3], ProviderType: "aws", ProviderUID: "333333333333",
				Time: time.Now(), Raw: []byte(`{}`)})
		}
		if err := env.Store.StartRun(ctx, env.Tenant, "bulk", 1, len(bulk)); err != nil {
			t.Fatal(err)
		}
		if err := env.Store.WriteBatch(ctx, env.Tenant, "bulk", 1, store.Batch{Findings: bulk}); err != nil {
			t.Fatal(err)
		}
		type catalogue struct {
			Checks []struct {
				CheckID  string `json:"check_id"`
				Findings int    `json:"findings"`
			} `json:"checks"`
			Matched    int    `json:"findings_matched"`
			Complete   bool   `json:"complete"`
			LowerBound bool   `json:"findings_matched_is_lower_bound"`
			Note       string `json:"note"`
		}
		for _, tc := range []struct {
			search   string
			matched  int
			complete bool
		}{
			{"bulk-", 1001, false}, // 1,100 match: the first 1,001 found are counted
			{"bulk-10", 111, true}, // bulk-10, bulk-100..109, bulk-1000..1099
		} {
			var got catalogue
			call(t, "list_check_ids", map[string]any{"search": tc.search, "history": true}, &got)
			sum := 0
			for _, c := range got.Checks {
				sum += c.Findings
				if !strings.HasPrefix(c.CheckID, "bulk_check_") || c.Findings > 1100/3+1 {
					t.Errorf("search %q: check %q with %d findings", tc.search, c.CheckID, c.Findings)
				}
			}
			if got.Matched != tc.matched || sum != tc.matched || got.Complete != tc.complete || got.LowerBound == tc.complete ||
				(got.Note == "") == !tc.complete {
				t.Errorf("search %q: %+v; want %d findings matched, complete %v, and a note only when incomplete", tc.search, got, tc.matched, tc.complete)
			}
		}
	})
}
