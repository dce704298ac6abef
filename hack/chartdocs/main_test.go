package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChartREADMEIsCurrent fails when charts/posture/README.md's values table
// no longer matches values.yaml and values.schema.json.
func TestChartREADMEIsCurrent(t *testing.T) {
	if err := run(filepath.Join("..", "..", "charts", "posture"), true); err != nil {
		t.Fatal(err)
	}
}

func TestTableRefusesGaps(t *testing.T) {
	const schema = `{"properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}}, "c": {"type": "string", "enum": ["x", "y"]}}}`
	for _, tc := range []struct {
		name, values, want string
	}{
		{"documented leaf and parent cover", "# -- A.\na:\n  b: 1\n# -- C.\nc: x\n", "| `c` | string (`x`, `y`) | `x` | C. |"},
		{"+docs:property marks a key", "a:\n  # +docs:property\n  # B, one.\n  b: 1\n# -- C.\nc: x\n", "| `a.b` | integer | `1` | B, one. |"},
		{"undocumented leaf", "a:\n  b: 1\n# -- C.\nc: x\n", "error: a.b has no"},
		{"documented key the schema lacks", "# -- A.\na:\n  b: 1\n# -- D.\nd: 2\n", "error: d: not in values.schema.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range map[string]string{"values.yaml": tc.values, "values.schema.json": schema} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			table, err := Table(dir)
			got := table
			if err != nil {
				got = "error: " + err.Error()
			}
			if want, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("got %q, want an error containing %q", got, want)
				}
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("table\n%s\nlacks %s", got, tc.want)
			}
		})
	}
}
