package mcp

import (
	"strings"
	"testing"
)

// An id is one path segment: a dot segment would address the parent
// endpoint (GET /findings/. is redirected to the findings list).
func TestPathIDRefusesDotSegments(t *testing.T) {
	for _, id := range []string{".", "..", " .. "} {
		if got, err := pathID("finding", id); err == nil || !strings.Contains(err.Error(), "not an id") {
			t.Errorf("pathID(%q) = %q, %v; want an error", id, got, err)
		}
	}
	for id, want := range map[string]string{"abc": "abc", "../tenant": "..%2Ftenant", "...": "..."} {
		if got, err := pathID("finding", id); err != nil || got != want {
			t.Errorf("pathID(%q) = %q, %v; want %q", id, got, err, want)
		}
	}
}
