package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/posture-dev/posture/internal/apitest"
)

// TestToolsWithoutArguments calls every tool the server lists with its
// arguments omitted, as "arguments": null and as "arguments": {}, in raw
// JSON-RPC over real HTTP (the SDK's client would normalise the first two
// away), with a real API behind the server. The server once panicked inside
// the SDK with "assignment to entry in nil map": a null decodes into a nil
// map into which the SDK then writes the schema's defaults.
//
// Each call must be answered with a JSON-RPC result, and the server must
// answer the next call (a panic on the SDK's goroutine would end the
// process). A missing argument is a tool error (isError) that names the
// missing field, not the JSON-RPC error -32602: the MCP specification
// (2025-11-25, Tools, Error Handling) says input validation errors are tool
// execution errors, so that the model reads them and corrects its call, and
// keeps protocol errors for unknown tools and malformed requests; the SDK
// answers a failed schema validation with an isError result too. A tool
// without required fields gives its normal answer, except those whose
// handler needs one of several optional fields (needsOneOf), which must name
// the field to give.
func TestToolsWithoutArguments(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	s, err := New(Config{APIBaseURL: env.URL + "/api/v1"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	endpoint := hs.URL + "/mcp"
	// As a client configured with the key as a Bearer token sends it.
	authz := "Bearer " + env.APIKey

	// The tools as a client lists them, with their input schemas.
	var tools []*mcpsdk.Tool
	for tool, err := range inMemorySession(t, s).Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, tool)
	}
	if len(tools) != len(s.Tools()) {
		t.Fatalf("the client lists %d tools, the server registered %d (%v)", len(tools), len(s.Tools()), s.Tools())
	}

	// Tools with no required field whose handler still needs one of its
	// optional fields, and the field its error must name.
	needsOneOf := map[string]string{"upload_report": "content"}

	forms := []struct {
		name string
		// params of tools/call but the tool's name, spliced in.
		params string
	}{
		{"omitted", `{"name":%q}`},
		{"null", `{"name":%q,"arguments":null}`},
		{"empty object", `{"name":%q,"arguments":{}}`},
	}
	id := 0
	for _, tool := range tools {
		required := requiredFields(t, tool)
		for _, form := range forms {
			t.Run(tool.Name+"/"+form.name, func(t *testing.T) {
				id++
				res := postCall(t, endpoint, authz, id, fmt.Sprintf(form.params, tool.Name))
				text := res.text()
				t.Logf("isError %v: %.200s", res.IsError, text)
				switch {
				case len(required) > 0:
					if !res.IsError {
						t.Fatalf("answer %s; want a tool error naming the missing %v", text, required)
					}
					for _, f := range required {
						if !strings.Contains(text, `"`+f+`"`) {
							t.Errorf("tool error %q does not name the missing field %q", text, f)
						}
					}
				case needsOneOf[tool.Name] != "":
					if !res.IsError || !strings.Contains(text, needsOneOf[tool.Name]) {
						t.Errorf("answer %s (isError %v); want a tool error naming %s", text, res.IsError, needsOneOf[tool.Name])
					}
				default:
					if res.IsError {
						t.Errorf("tool error %q; a tool without required fields must answer normally", text)
					}
				}
			})
		}
	}

	// Whatever happened above, the server still answers.
	id++
	res := postCall(t, endpoint, authz, id, `{"name":"get_ocsf_reference","arguments":{"field":"class_uid"}}`)
	if res.IsError || !strings.Contains(res.text(), "class_uid") {
		t.Fatalf("after the calls without arguments: %s", res.text())
	}
}

// requiredFields is the "required" list of a listed tool's input schema.
func requiredFields(t *testing.T, tool *mcpsdk.Tool) []string {
	t.Helper()
	b, err := json.Marshal(tool.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	var sch struct {
		Type     string   `json:"type"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(b, &sch); err != nil {
		t.Fatalf("input schema of %s: %v", tool.Name, err)
	}
	if sch.Type != "object" {
		t.Fatalf("input schema of %s has type %q, want object", tool.Name, sch.Type)
	}
	slices.Sort(sch.Required)
	return sch.Required
}

// callResult is the part of a CallToolResult the test reads.
type callResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func (r callResult) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// postCall POSTs one tools/call with params to the stateless endpoint and
// returns its result; a JSON-RPC error, a failed HTTP exchange or an answer
// to another id fails the test.
func postCall(t *testing.T, endpoint, authz string, id int, params string) callResult {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params)
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", authz)
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v (did the server go down?)", body, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the answer: %v", body, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: HTTP %s: %s", body, resp.Status, raw)
	}
	msg := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg = nil
		sc := bufio.NewScanner(strings.NewReader(string(raw)))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				msg = []byte(strings.TrimSpace(d))
			}
		}
		if msg == nil {
			t.Fatalf("POST %s: no message in the event stream %q", body, raw)
		}
	}
	var rpc struct {
		ID     int             `json:"id"`
		Result *callResult     `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(msg, &rpc); err != nil {
		t.Fatalf("POST %s: answer %q is not JSON-RPC: %v", body, msg, err)
	}
	if rpc.Error != nil || rpc.Result == nil {
		t.Fatalf("POST %s: answered with a JSON-RPC error, not a tool result: %s", body, msg)
	}
	if rpc.ID != id {
		t.Fatalf("POST %s: answer is for id %d", body, rpc.ID)
	}
	return *rpc.Result
}
