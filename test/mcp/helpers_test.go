// Package mcp_test drives the real mcp-server binary with real MCP clients
// (the MCP Inspector CLI and the mcp-remote bridge, pinned in
// test/package.json and installed by hack/test-deps.sh) against the real
// REST API of internal/apitest, all over loopback.
package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/testenv"
)

// serverBin is the mcp-server built once for the test binary. It lives at a
// fixed temp path (overwritten each run) because apitest.Main exits the
// process, leaving no place to remove a fresh temp dir.
var serverBin = filepath.Join(os.TempDir(), "posture-mcp-test", "mcp-server")

func TestMain(m *testing.M) {
	if err := buildServer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	apitest.Main(m)
}

func buildServer() error {
	if err := os.MkdirAll(filepath.Dir(serverBin), 0o755); err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", serverBin, "./cmd/mcp-server")
	cmd.Dir = testenv.Root()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/mcp-server: %v\n%s", err, out)
	}
	return nil
}

// nodeBin is an installed npm client. Missing clients fail the test: the
// test setup (hack/test-deps.sh, run by make test) installs them.
func nodeBin(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(testenv.Root(), "test", "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("MCP client %s is not installed at %s: run hack/test-deps.sh (make test runs it first)", name, p)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed; the MCP clients need Node.js 20+: %v", err)
	}
	return p
}

// clientEnv is the environment of the npm clients: the test's own, without
// credentials that could leak in, with a throwaway HOME so that nothing is
// read from or written to the developer's, and in-memory secrets.
func clientEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "PROWLER_API_KEY", "API_BASE_URL", "HOME", "POSTURE_MCP_DEFAULT_API_KEY":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+t.TempDir(), "MCP_INSPECTOR_SECRET_STORE=memory", "NO_COLOR=1", "CI=true")
}

// mcpServer is a running mcp-server over HTTP.
type mcpServer struct {
	URL  string
	logs *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startHTTPServer runs the binary on a free loopback port against apiBase.
func startHTTPServer(t *testing.T, apiBase string, extraEnv ...string) *mcpServer {
	t.Helper()
	cmd := exec.Command(serverBin, "--transport", "http", "--addr", "127.0.0.1:0", "--api-base-url", apiBase, "--log-level", "debug")
	cmd.Env = append(clientEnv(t), extraEnv...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logs, line)
			if u, ok := strings.CutPrefix(line, "mcp-server: listening on "); ok {
				urlc <- u
			}
		}
	}()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("mcp-server did not stop within 15s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("mcp-server log:\n%s", logs.String())
		}
	})
	select {
	case u := <-urlc:
		return &mcpServer{URL: u, logs: logs}
	case <-done:
		t.Fatalf("mcp-server exited before listening:\n%s", logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("mcp-server did not report its address within 30s:\n%s", logs.String())
	}
	return nil
}

// cliResult is one run of an npm client.
type cliResult struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nargs: %q\nstdout:\n%s\nstderr:\n%s", r.code, r.args, r.stdout, r.stderr)
}

// inspector runs the MCP Inspector in CLI mode.
func inspector(t *testing.T, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args = append([]string{"--cli"}, args...)
	cmd := exec.CommandContext(ctx, nodeBin(t, "mcp-inspector"), args...)
	cmd.Env = clientEnv(t)
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{args: args, stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run mcp-inspector: %v\n%s", err, res)
	}
	if ctx.Err() != nil {
		t.Fatalf("mcp-inspector timed out\n%s", res)
	}
	return res
}

// httpTarget addresses an HTTP server, with an Authorization header if given.
func httpTarget(url, authorization string) []string {
	args := []string{url, "--transport", "http"}
	if authorization != "" {
		args = append(args, "--header", "Authorization: "+authorization)
	}
	return args
}

// configTarget addresses the server "posture" of a client configuration
// file in the spec's format: mcpServers.<name> with url+headers or
// command+args+env.
func configTarget(t *testing.T, server map[string]any) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp.json")
	b, err := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{"posture": server}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--config", path, "--server", "posture"}
}

type toolInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Annotations struct {
		ReadOnlyHint    bool  `json:"readOnlyHint"`
		DestructiveHint *bool `json:"destructiveHint"`
	} `json:"annotations"`
	InputSchema map[string]any `json:"inputSchema"`
}

func listTools(t *testing.T, target []string) []toolInfo {
	t.Helper()
	res := inspector(t, append(target, "--method", "tools/list")...)
	if res.code != 0 {
		t.Fatalf("tools/list failed\n%s", res)
	}
	var out struct {
		Tools []toolInfo `json:"tools"`
	}
	if err := json.NewDecoder(strings.NewReader(res.stdout)).Decode(&out); err != nil {
		t.Fatalf("tools/list output is not JSON: %v\n%s", err, res)
	}
	return out.Tools
}

// toolResult is an MCP CallToolResult as the inspector prints it.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Structured json.RawMessage `json:"structuredContent"`
	IsError    bool            `json:"isError"`
	run        cliResult
}

func (r toolResult) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

func (r toolResult) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Structured, v); err != nil {
		t.Fatalf("structured content does not decode into %T: %v\n%s", v, err, r.run)
	}
}

// callTool runs tools/call. Argument values are JSON where they parse as
// JSON (the inspector's rule), so strings that look like JSON must be
// passed quoted; see jsonString.
func callTool(t *testing.T, target []string, tool string, args ...string) toolResult {
	t.Helper()
	a := append(append([]string{}, target...), "--method", "tools/call", "--tool-name", tool)
	for _, kv := range args {
		a = append(a, "--tool-arg", kv)
	}
	res := inspector(t, a...)
	var out toolResult
	if err := json.NewDecoder(strings.NewReader(res.stdout)).Decode(&out); err != nil {
		t.Fatalf("tools/call %s printed no result: %v\n%s", tool, err, res)
	}
	out.run = res
	// The inspector exits 0 for a result and 5 for an isError result.
	if (res.code == 0) == out.IsError {
		t.Fatalf("tools/call %s: exit code %d does not match isError=%v\n%s", tool, res.code, out.IsError, res)
	}
	return out
}

// mustSucceed calls a tool and fails the test on an error result.
func mustSucceed(t *testing.T, target []string, tool string, args ...string) toolResult {
	t.Helper()
	r := callTool(t, target, tool, args...)
	if r.IsError {
		t.Fatalf("%s returned an error: %s\n%s", tool, r.text(), r.run)
	}
	return r
}

// mustFail calls a tool and checks that it returns an error result that
// says each of want.
func mustFail(t *testing.T, target []string, tool string, want []string, args ...string) toolResult {
	t.Helper()
	r := callTool(t, target, tool, args...)
	if !r.IsError {
		t.Fatalf("%s succeeded; want an error saying %q\n%s", tool, want, r.run)
	}
	for _, w := range want {
		if !strings.Contains(r.text(), w) {
			t.Errorf("%s error %q does not say %q", tool, r.text(), w)
		}
	}
	return r
}

// jsonString quotes s as a JSON string so that the inspector passes it on
// as a string instead of parsing it.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// keyOrJWT authenticates one API key (as Api-Key) and one JWT (as Bearer)
// for the tenant of an apitest Env, and nothing else: a JWT forwarded with
// the wrong scheme, or a key sent as Bearer, is refused like a bad key.
type keyOrJWT struct {
	key, jwt  string
	principal auth.Principal
}

func (a *keyOrJWT) Authenticate(r *http.Request) (auth.Principal, error) {
	cred, err := auth.ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		return auth.Principal{}, err
	}
	switch {
	case cred.Scheme == "Api-Key" && auth.EqualHash(auth.HashKey(cred.Value), auth.HashKey(a.key)):
		return a.principal, nil
	case cred.Scheme == "Bearer" && auth.EqualHash(auth.HashKey(cred.Value), auth.HashKey(a.jwt)):
		return a.principal, nil
	}
	return auth.Principal{}, &auth.Error{Reason: "invalid credential for scheme " + cred.Scheme}
}

// postInitialize sends an MCP initialize request directly, to see the HTTP
// status a credential gets.
func postInitialize(t *testing.T, url, authorization string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
