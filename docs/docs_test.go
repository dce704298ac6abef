package docs

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

var separator = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+\s*$`)

// TestTablesAreWhole: every table row of the docs belongs to a table, a
// header and its separator line first. A row left below a later paragraph
// (as one of troubleshooting.md's was, after "Trying crash recovery
// locally") renders as a stray line of pipes, and the MCP docs tools serve
// it under the wrong section.
func TestTablesAreWhole(t *testing.T) {
	pages, err := fs.Glob(FS, "*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages (%v)", err)
	}
	for _, page := range pages {
		b, err := fs.ReadFile(FS, page)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		fenced := false
		for i := 0; i < len(lines); i++ {
			if strings.HasPrefix(strings.TrimSpace(lines[i]), "```") {
				fenced = !fenced
				continue
			}
			if fenced || !strings.HasPrefix(lines[i], "|") {
				continue
			}
			start := i
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "|") {
				i++
			}
			if i == start || !separator.MatchString(lines[start+1]) {
				t.Errorf("%s:%d: a table row with no header and separator above it: %.80s", page, start+1, lines[start])
			}
		}
	}
}
