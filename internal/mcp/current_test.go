package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/ingest"
)

// TestCurrentStateThroughRESTAndMCP uploads, on both engines and with the
// real worker, a full report of one account, a partial one an hour later,
// a report a day older and a newer run of one check, and after each asks
// GET /findings/latest (with filter[delta]) and the search_findings tool
// for the current state, each finding's delta, and the resolved findings,
// against what the rule gives for these reports (written out per step):
// for each check, the findings of its newest run.
func TestCurrentStateThroughRESTAndMCP(t *testing.T) {
	for _, engine := range []struct {
		name     string
		postgres bool
	}{{"sqlite", false}, {"postgres", true}} {
		t.Run(engine.name, func(t *testing.T) { testCurrentDoors(t, engine.postgres) })
	}
}

// record is one finding of a test report: uid, check and status.
type record struct{ uid, check, status string }

func testCurrentDoors(t *testing.T, postgres bool) {
	env := apitest.Start(t, apitest.Options{Postgres: postgres})
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join("..", "ocsf", "testdata", "prowler", "aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var base []map[string]any
	if err := json.Unmarshal(raw, &base); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	// report renders records on the fixture's first one, at time at.
	report := func(at time.Time, rs ...record) []byte {
		var out []map[string]any
		for _, r := range rs {
			var rec map[string]any
			b, _ := json.Marshal(base[0])
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatal(err)
			}
			rec["time"] = at.Unix()
			rec["time_dt"] = at.Format(time.RFC3339)
			rec["status_code"] = r.status
			rec["metadata"].(map[string]any)["event_code"] = r.check
			rec["finding_info"].(map[string]any)["uid"] = r.uid
			out = append(out, rec)
		}
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	n := 0
	upload := func(doc []byte) {
		t.Helper()
		n++
		blob, err := env.Store.PutBlob(ctx, env.Tenant, strings.NewReader(string(doc)))
		if err != nil {
			t.Fatal(err)
		}
		w := &ingest.Worker{Store: env.Store, Log: logr.Discard()}
		if err := w.Run(ctx, ingest.Attempt{Tenant: env.Tenant, IngestionID: fmt.Sprintf("ing-%d", n), BlobID: blob.ID, Attempt: 1, ReportSHA256: blob.SHA256}); err != nil {
			t.Fatalf("ingest report %d: %v", n, err)
		}
	}

	s, err := New(Config{APIBaseURL: env.URL + "/api/v1", DefaultToken: env.APIKey})
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcpsdk.NewInMemoryTransports()
	ss, err := s.SDK().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	type item struct {
		UID         string `json:"uid"`
		StatusCode  string `json:"status_code"`
		Delta       string `json:"delta"`
		FirstSeenAt string `json:"first_seen_at"`
	}
	// render lists items as "uid status delta", sorted.
	render := func(items []item) []string {
		var out []string
		for _, it := range items {
			out = append(out, strings.TrimSpace(it.UID+" "+it.StatusCode+" "+it.Delta))
		}
		slices.Sort(out)
		return out
	}
	viaREST := func(delta string) []item {
		t.Helper()
		q := "page[size]=100"
		if delta != "" {
			q += "&filter[delta]=" + delta
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+"/api/v1/findings/latest?"+q, nil)
		req.Header.Set("Authorization", env.Authorization())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct {
			Data []struct {
				Attributes item `json:"attributes"`
			} `json:"data"`
		}
		if resp.StatusCode != 200 {
			t.Fatalf("GET /findings/latest?%s: %s", q, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		var out []item
		for _, d := range doc.Data {
			out = append(out, d.Attributes)
		}
		return out
	}
	viaMCP := func(delta string) []item {
		t.Helper()
		args := map[string]any{"page_size": 100}
		if delta != "" {
			args["delta"] = delta
		}
		res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "search_findings", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("search_findings %v: %v %+v", args, err, res)
		}
		var page struct {
			Items []item `json:"items"`
		}
		if err := json.Unmarshal([]byte(res.Content[0].(*mcpsdk.TextContent).Text), &page); err != nil {
			t.Fatal(err)
		}
		return page.Items
	}

	steps := []struct {
		name             string
		report           []byte
		current          []string // "uid status delta"
		resolved         []string // "uid status resolved"
		firstSeenOfFirst string   // u1's first_seen_at
	}{
		{"a full report", report(t0,
			record{"u1", "c1", "FAIL"}, record{"u2", "c1", "PASS"}, record{"u3", "c2", "FAIL"}, record{"u4", "c2", "FAIL"}, record{"u5", "c3", "FAIL"}),
			[]string{"u1 FAIL new", "u2 PASS new", "u3 FAIL new", "u4 FAIL new", "u5 FAIL new"}, nil, "2026-11-20T10:00:00Z"},
		// c2 only: u3 passes now and u4 is gone; c1 and c3 keep the full report.
		{"a partial report an hour later", report(t0.Add(time.Hour),
			record{"u3", "c2", "PASS"}, record{"u6", "c2", "FAIL"}),
			[]string{"u1 FAIL new", "u2 PASS new", "u3 PASS changed", "u5 FAIL new", "u6 FAIL new"},
			[]string{"u3 FAIL resolved", "u4 FAIL resolved"}, "2026-11-20T10:00:00Z"},
		// Older than every current run: nothing changes but u1's first sighting.
		{"a report a day older", report(t0.Add(-24*time.Hour),
			record{"u1", "c1", "PASS"}, record{"u3", "c2", "FAIL"}, record{"u5", "c3", "PASS"}),
			[]string{"u1 FAIL new", "u2 PASS new", "u3 PASS changed", "u5 FAIL new", "u6 FAIL new"},
			[]string{"u3 FAIL resolved", "u4 FAIL resolved"}, "2026-11-19T10:00:00Z"},
		// c3 again: u5 passes.
		{"a newer run of one check", report(t0.Add(2*time.Hour), record{"u5", "c3", "PASS"}),
			[]string{"u1 FAIL new", "u2 PASS new", "u3 PASS changed", "u5 PASS changed", "u6 FAIL new"},
			[]string{"u3 FAIL resolved", "u4 FAIL resolved", "u5 FAIL resolved"}, "2026-11-19T10:00:00Z"},
	}
	for _, step := range steps {
		upload(step.report)
		for door, read := range map[string]func(string) []item{"REST": viaREST, "MCP": viaMCP} {
			current := read("")
			if got := render(current); !slices.Equal(got, step.current) {
				t.Errorf("%s, %s: current state %v, want %v", step.name, door, got, step.current)
			}
			for _, it := range current {
				if it.UID == "u1" && it.FirstSeenAt != step.firstSeenOfFirst {
					t.Errorf("%s, %s: u1 first seen at %q, want %q", step.name, door, it.FirstSeenAt, step.firstSeenOfFirst)
				}
			}
			for _, d := range []string{"new", "changed"} {
				var want []string
				for _, c := range step.current {
					if strings.HasSuffix(c, " "+d) {
						want = append(want, c)
					}
				}
				if got := render(read(d)); !slices.Equal(got, want) {
					t.Errorf("%s, %s: delta %s: %v, want %v", step.name, door, d, got, want)
				}
			}
			if got := render(read("resolved")); !slices.Equal(got, step.resolved) {
				t.Errorf("%s, %s: resolved %v, want %v", step.name, door, got, step.resolved)
			}
		}
	}
}
