package mcp

import (
	"context"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// inMemoryClient is an MCP client session with a server of the API at
// apiURL (its /api/v1 root's host) that calls it with token; both ends
// close when the test does.
func inMemoryClient(t *testing.T, apiURL, token string) *mcpsdk.ClientSession {
	t.Helper()
	s, err := New(Config{APIBaseURL: apiURL + "/api/v1", DefaultToken: token})
	if err != nil {
		t.Fatal(err)
	}
	return inMemorySession(t, s)
}

// inMemorySession is an MCP client session with s; both ends close when
// the test does.
func inMemorySession(t *testing.T, s *Server) *mcpsdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcpsdk.NewInMemoryTransports()
	ss, err := s.SDK().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
