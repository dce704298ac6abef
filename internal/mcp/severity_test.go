package mcp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/posture-dev/posture/internal/apitest"
)

// TestToolsAnswerOneSeverity ingests the example report, which labels its
// records Critical with severity_id 1 ... Informational with 5, with the
// real worker, and asks the tools: a finding reads as the pair its caption
// gives (critical/5), the most severe come first, and the overview counts
// them under that caption.
func TestToolsAnswerOneSeverity(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	report, err := os.Open(filepath.Join("..", "..", "examples", "aws_1500_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer report.Close()
	env.Ingest(t, "example", report)

	cs := inMemoryClient(t, env.URL, env.APIKey)
	call := func(t *testing.T, name string, args map[string]any, out any) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		if err := json.Unmarshal([]byte(res.Content[0].(*mcpsdk.TextContent).Text), out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	type item struct {
		Severity   string `json:"severity"`
		SeverityID int    `json:"severity_id"`
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		want item
	}{
		{"most severe first", map[string]any{"sort": "-severity_id", "page_size": 5}, item{"critical", 5}},
		{"least severe first", map[string]any{"sort": "severity_id", "page_size": 5}, item{"informational", 1}},
		{"critical ones", map[string]any{"severity": []string{"critical"}, "page_size": 5}, item{"critical", 5}},
		{"high ones", map[string]any{"severity": []string{"high"}, "page_size": 5}, item{"high", 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var page struct {
				Items []item `json:"items"`
			}
			call(t, "search_findings", tc.args, &page)
			if len(page.Items) != 5 {
				t.Fatalf("%d items, want 5", len(page.Items))
			}
			for _, it := range page.Items {
				if it != tc.want {
					t.Fatalf("search_findings %v answered %+v, want %+v", tc.args, it, tc.want)
				}
			}
		})
	}

	var overview struct {
		BySeverity map[string]int `json:"by_severity"`
	}
	call(t, "get_findings_overview", nil, &overview)
	for _, sev := range []string{"critical", "high", "medium", "low", "informational"} {
		if overview.BySeverity[sev] != 300 {
			t.Errorf("overview by severity %v: want 300 of each of the file's five captions", overview.BySeverity)
			break
		}
	}
}
