package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// withAuthorization sends an Authorization header on every request, as an
// MCP client configured with a header does.
type withAuthorization struct {
	authz string
	next  http.RoundTripper
}

func (a withAuthorization) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", a.authz)
	return a.next.RoundTrip(r)
}

// mcpSession connects to the MCP server over streamable HTTP with authz.
func (w *world) mcpSession(ctx context.Context, authz string) (*mcpsdk.ClientSession, error) {
	hc := &http.Client{Transport: withAuthorization{authz, w.hc.Transport}, Timeout: 2 * time.Minute}
	tr := &mcpsdk.StreamableClientTransport{Endpoint: w.sys.MCPURL, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}
	c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "posture-soak", Version: "1"}, nil)
	return c.Connect(ctx, tr, nil)
}

// mcpCaller calls the MCP server's tools as an agent of the tenant would,
// with the tenant's agent key, and sometimes with the admin's session
// token, and holds every answer to the tenant.
func (w *world) mcpCaller(ctx context.Context, t *tenant) {
	rng := w.rng()
	var key *mcpsdk.ClientSession
	defer func() {
		if key != nil {
			key.Close()
		}
	}()
	for sleep(ctx, jitter(rng, 1200*time.Millisecond)) {
		name, args := w.pickTool(rng, t)
		if name == "" {
			continue
		}
		authz, label := "Bearer "+t.agent.APIKey, "agent key"
		t.mu.Lock()
		access := t.access
		t.mu.Unlock()
		jwt := access != "" && rng.IntN(4) == 0
		if jwt {
			authz, label = "Bearer "+access, "admin session"
		}
		session := key
		if jwt || key == nil {
			start := time.Now()
			s, err := w.mcpSession(ctx, authz)
			if err != nil {
				if ctx.Err() == nil {
					w.rec.record(call{op: "mcp.connect", start: start, took: time.Since(start), err: err, want: []int{200}, what: label})
				}
				continue
			}
			w.rec.record(call{op: "mcp.connect", start: start, took: time.Since(start), status: 200, want: []int{200}, what: label})
			if !jwt {
				key = s
			}
			session = s
		}
		if !jwt {
			_ = t.agentPace.Wait(ctx)
		} else {
			_ = t.userPace.Wait(ctx)
		}
		w.callTool(ctx, t, session, name, args, label)
		if jwt {
			session.Close()
		}
	}
}

// pickTool is a tool and arguments about what the tenant has.
func (w *world) pickTool(rng *rand.Rand, t *tenant) (string, map[string]any) {
	t.mu.Lock()
	finding := t.findingIDs.pick(rng)
	t.mu.Unlock()
	var ingestion string
	if u := t.pickAccepted(rng); u != nil {
		ingestion = u.id
	}
	switch rng.IntN(11) {
	case 0:
		return "list_ingestions", map[string]any{"page_size": 20}
	case 1:
		if ingestion != "" {
			return "get_ingestion", map[string]any{"id": ingestion}
		}
	case 2:
		if u := t.pickChecked(rng, func(u *upload) bool { return len(u.spec.bad) > 0 }); u != nil {
			return "list_ingestion_errors", map[string]any{"id": u.id, "page_size": 50}
		}
	case 3:
		return "search_findings", map[string]any{"severity": []string{"critical", "high"}, "page_size": 20}
	case 4:
		return "search_findings", map[string]any{"search": t.accounts[rng.IntN(len(t.accounts))], "history": true, "page_size": 20}
	case 5:
		if finding != "" {
			return "get_finding", map[string]any{"id": finding, "include_record": false}
		}
	case 6:
		return "get_findings_overview", map[string]any{}
	case 7:
		return "list_providers", map[string]any{}
	case 8:
		return "list_scans", map[string]any{"page_size": 20}
	case 9:
		return "get_tenant_usage", map[string]any{}
	case 10:
		return "list_check_ids", map[string]any{"provider_type": "aws"}
	}
	return "", nil
}

// callTool calls one tool and checks its answer: no error, and nothing of
// another tenant in it.
func (w *world) callTool(ctx context.Context, t *tenant, s *mcpsdk.ClientSession, name string, args map[string]any, label string) {
	start := time.Now()
	res, err := s.CallTool(ctx, &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if ctx.Err() != nil {
		return
	}
	c := call{op: "mcp." + name, start: start, took: time.Since(start), want: []int{200}, what: fmt.Sprintf("%v as %s", args, label)}
	var body []byte
	switch {
	case err != nil:
		c.err = err
	case res.IsError:
		// The tool's structured error carries the API's status.
		c.status, c.code, c.err = toolErrorOf(res)
	default:
		c.status = 200
		body, _ = json.Marshal(res.StructuredContent)
		for _, ct := range res.Content {
			if tc, ok := ct.(*mcpsdk.TextContent); ok {
				body = append(body, tc.Text...)
			}
		}
	}
	if !w.rec.record(c) {
		return
	}
	w.noForeignAccounts(t, c.op, body)
	var out struct {
		Items []struct {
			ID          string `json:"id"`
			ProviderUID string `json:"provider_uid"`
			UID         string `json:"uid"`
			IngestionID string `json:"ingestion_id"`
			FindingUID  string `json:"finding_uid"`
		} `json:"items"`
		ProviderUID string `json:"provider_uid"`
		Name        string `json:"name"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	for _, it := range out.Items {
		if it.ProviderUID != "" && !t.ownsAccount(it.ProviderUID) || it.UID != "" && name != "list_providers" && !t.namesOwnAccount(it.UID) && !t.ownsAccount(it.UID) {
			w.probs.add("isolation", "%s as %s lists %+v", c.op, t.name, it)
		}
		if name == "list_ingestions" {
			t.saw(it.ID, c.op)
		} else {
			t.saw(it.IngestionID, c.op)
		}
	}
	if name == "get_finding" && !t.ownsAccount(out.ProviderUID) {
		w.probs.add("isolation", "%s as %s answers a finding of account %s", c.op, t.name, out.ProviderUID)
	}
	if name == "get_tenant_usage" && out.Name != t.name {
		w.probs.add("isolation", "%s as %s answers tenant %q", c.op, t.name, out.Name)
	}
}

// crossTool calls a tool as tenant a about another tenant's object: the
// tool must fail with the API's 404.
func (w *world) crossTool(ctx context.Context, a *tenant, name string, args map[string]any) {
	start := time.Now()
	session, err := w.mcpSession(ctx, "Bearer "+a.agent.APIKey)
	if err != nil {
		if ctx.Err() == nil {
			w.rec.record(call{op: "mcp.connect", start: start, took: time.Since(start), err: err, want: []int{200}, what: "agent key"})
		}
		return
	}
	defer session.Close()
	_ = a.agentPace.Wait(ctx)
	start = time.Now()
	res, err := session.CallTool(ctx, &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if ctx.Err() != nil {
		return
	}
	c := call{op: "cross.mcp." + name, start: start, took: time.Since(start), want: []int{404}, what: fmt.Sprintf("%v as %s", args, a.name)}
	switch {
	case err != nil:
		c.err = err
	case res.IsError:
		c.status, c.code, c.err = toolErrorOf(res)
	default:
		c.status = 200
		w.probs.add("isolation", "%s as %s answered another tenant's object", c.op, a.name)
	}
	w.rec.record(c)
}

// toolErrorOf reads a tool error's API status and code; without a status,
// the API did not answer.
func toolErrorOf(res *mcpsdk.CallToolResult) (int, string, error) {
	var e struct {
		Error struct {
			Status  int    `json:"http_status"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &e)
	if e.Error.Status == 0 {
		return 0, "", errors.New(e.Error.Message)
	}
	return e.Error.Status, e.Error.Code, nil
}
