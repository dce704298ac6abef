package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/posture-dev/posture/internal/apitest"
)

// TestCurrentStateThroughRESTAndMCP uploads apitest.CurrentScenario's
// reports of one account (full, partial, older, one check again) on both
// engines, with the real worker, and after each asks GET /findings/latest
// (with filter[delta]) and the search_findings tool for the current state,
// each finding's delta and first sighting, and the resolved findings,
// against what the rule gives (the scenario's expectations).
func TestCurrentStateThroughRESTAndMCP(t *testing.T) {
	for _, engine := range []struct {
		name     string
		postgres bool
	}{{"sqlite", false}, {"postgres", true}} {
		t.Run(engine.name, func(t *testing.T) { testCurrentDoors(t, engine.postgres) })
	}
}

func testCurrentDoors(t *testing.T, postgres bool) {
	env := apitest.Start(t, apitest.Options{Postgres: postgres})
	ctx := context.Background()
	n := 0
	upload := func(doc []byte) {
		t.Helper()
		n++
		env.Ingest(t, fmt.Sprintf("ing-%d", n), bytes.NewReader(doc))
	}

	cs := inMemoryClient(t, env.URL, env.APIKey)

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

	steps := apitest.CurrentScenario(t)
	for _, step := range steps {
		upload(step.Report)
		for door, read := range map[string]func(string) []item{"REST": viaREST, "MCP": viaMCP} {
			current := read("")
			if got := render(current); !slices.Equal(got, step.Current) {
				t.Errorf("%s, %s: current state %v, want %v", step.Name, door, got, step.Current)
			}
			for _, it := range current {
				if want := step.FirstSeenOfU1.Format(time.RFC3339); it.UID == "u1" && it.FirstSeenAt != want {
					t.Errorf("%s, %s: u1 first seen at %q, want %q", step.Name, door, it.FirstSeenAt, want)
				}
			}
			for _, d := range []string{"new", "changed"} {
				var want []string
				for _, c := range step.Current {
					if strings.HasSuffix(c, " "+d) {
						want = append(want, c)
					}
				}
				if got := render(read(d)); !slices.Equal(got, want) {
					t.Errorf("%s, %s: delta %s: %v, want %v", step.Name, door, d, got, want)
				}
			}
			if got := render(read("resolved")); !slices.Equal(got, step.Resolved) {
				t.Errorf("%s, %s: resolved %v, want %v", step.Name, door, got, step.Resolved)
			}
		}
	}
}
