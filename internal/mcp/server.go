// Package mcp is Posture's MCP tool server: documentation tools that work
// without authentication, and platform tools that call the REST API with
// the caller's credential. cmd/mcp-server serves it over
// streamable HTTP (stateless) or STDIO.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultAPIBaseURL is the hosted API a local STDIO server talks to when
// API_BASE_URL is not set; the form is the spec's {base_url}/api/v1.
const DefaultAPIBaseURL = "https://api.posture.dev/api/v1"

// DefaultMaxRequestBytes bounds one MCP message over HTTP. upload_report
// carries a whole report as a string argument, so this is also the largest
// report an HTTP client can upload through the tool server.
const DefaultMaxRequestBytes int64 = 32 << 20

// Config configures a Server.
type Config struct {
	// APIBaseURL is {base_url}/api/v1 of the Posture API.
	APIBaseURL string
	HTTPClient *http.Client
	// DefaultToken (an API key or JWT) is used when a caller sends no
	// credential: PROWLER_API_KEY for a STDIO server, and for an HTTP server
	// the optional server-side default key (off unless configured).
	DefaultToken string
	// LocalFiles lets upload_report read a path on this machine. Only a local
	// STDIO server, which runs as the user who started it, may do that.
	LocalFiles bool
	// Docs holds the *.md pages the documentation tools serve.
	Docs            fs.FS
	Logger          *slog.Logger
	Version         string
	MaxRequestBytes int64
}

// Server is the MCP tool server.
type Server struct {
	cfg          Config
	log          *slog.Logger
	api          *apiClient
	docs         *docSet
	sdk          *mcpsdk.Server
	verifier     *verifier
	defaultAuthz string
	tools        []string
}

// New builds a server; it fails only on configuration errors.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	api, err := newAPIClient(cfg.APIBaseURL, cfg.HTTPClient, "posture-mcp-server/"+cfg.Version)
	if err != nil {
		return nil, err
	}
	docs, err := loadDocs(cfg.Docs)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, api: api, docs: docs, verifier: newVerifier(api)}
	if tok := strings.TrimSpace(cfg.DefaultToken); tok != "" {
		s.defaultAuthz = AuthorizationForToken(tok)
	}
	s.sdk = mcpsdk.NewServer(&mcpsdk.Implementation{Name: "posture", Title: "Posture security posture", Version: cfg.Version},
		&mcpsdk.ServerOptions{Instructions: instructions, Logger: quiet(cfg.Logger)})
	s.sdk.AddReceivingMiddleware(s.guard)
	s.registerDocTools()
	s.registerPlatformTools()
	return s, nil
}

const instructions = `Posture turns OCSF Detection Finding reports (from scanners such as Prowler) into findings, scans and billed providers of a tenant.
Documentation tools (list_docs, search_docs, get_doc, get_ocsf_reference) need no credential.
Platform tools need an API key (Authorization: Bearer <key> over HTTP, PROWLER_API_KEY for a local STDIO server).
Typical flow: upload_report, then get_ingestion until status is completed or failed, list_ingestion_errors for rejected records, then get_findings_overview and search_findings.
Lists are paginated: pass page and page_size (at most 100) and follow next_page.`

// SDK is the underlying MCP server (for in-process transports in tests).
func (s *Server) SDK() *mcpsdk.Server { return s.sdk }

// APIBaseURL is the API address in use.
func (s *Server) APIBaseURL() string { return s.api.BaseURL() }

// Tools lists the registered tool names in registration order.
func (s *Server) Tools() []string { return append([]string(nil), s.tools...) }

// RunStdio serves one client over stdin/stdout until it disconnects.
func (s *Server) RunStdio(ctx context.Context) error {
	return s.sdk.Run(ctx, &mcpsdk.StdioTransport{})
}

// Handler serves /mcp (streamable HTTP, stateless) and /healthz.
func (s *Server) Handler() http.Handler {
	streamable := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s.sdk },
		&mcpsdk.StreamableHTTPOptions{Stateless: true, Logger: quiet(s.log), MaxRequestBodyBytes: s.cfg.MaxRequestBytes})
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("/mcp", s.authGate(streamable))
	return s.recoverer(mux)
}

// authGate refuses a credential the API rejects with HTTP 401 before any
// MCP message is handled, so that a client with a wrong key learns it at
// connect time. Requests without a credential pass: documentation tools
// need none, and platform tools explain what is missing.
func (s *Server) authGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		if h == "" {
			next.ServeHTTP(w, r)
			return
		}
		authz, err := ForwardAuthorization(h)
		if err == nil {
			err = s.verifier.verify(r.Context(), authz)
		}
		if err != nil {
			s.log.Info("refused a credential", "remote", r.RemoteAddr, "reason", err.Error())
			writeUnauthorized(w, err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeUnauthorized(w http.ResponseWriter, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("WWW-Authenticate", `Bearer realm="posture-mcp", error="invalid_token"`)
	w.WriteHeader(http.StatusUnauthorized)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error": map[string]any{
			"code":    -32001,
			"message": "unauthorized: " + detail,
		},
	})
}

func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// guard wraps every MCP request the server receives. The SDK handles each
// request on a goroutine of its own, out of reach of the HTTP recoverer, so
// a panic there ends the process: guard turns it into an answer (an error
// result for a tool call, an internal error otherwise).
//
// It also reads "arguments": null in a tool call as no arguments. The SDK
// (v1.8.0, applySchema in mcp/tool.go) decodes the arguments into a map,
// which a null leaves nil, and then writes the input schema's defaults
// into it: "assignment to entry in nil map" for every tool with a default
// (page, page_size, limit, wait_seconds). Without arguments the SDK starts
// from an empty map, as it does for {}.
func (s *Server) guard(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (res mcpsdk.Result, err error) {
		call, _ := req.(*mcpsdk.CallToolRequest)
		if call != nil && call.Params != nil && bytes.Equal(bytes.TrimSpace(call.Params.Arguments), []byte("null")) {
			call.Params.Arguments = nil
		}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if call != nil && call.Params != nil {
				s.log.Error("tool call panicked", "tool", call.Params.Name, "panic", v, "stack", string(debug.Stack()))
				res, err = toolError(fmt.Errorf("internal error in %s; the server log has the details", call.Params.Name)), nil
				return
			}
			s.log.Error("MCP request panicked", "method", method, "panic", v, "stack", string(debug.Stack()))
			res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error in " + method + "; the server log has the details"}
		}()
		return next(ctx, method, req)
	}
}

// caller is one tool invocation's view of the API.
type caller struct {
	s     *Server
	authz string // the API's Authorization value; "" without a credential
}

// authorization picks the credential for a tool call: the HTTP client's
// header, else the server's default token.
func (s *Server) authorization(req *mcpsdk.CallToolRequest) (string, error) {
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		if h := req.Extra.Header.Get("Authorization"); h != "" {
			return ForwardAuthorization(h)
		}
	}
	return s.defaultAuthz, nil
}

type toolFunc[In any] func(ctx context.Context, c *caller, in In) (any, error)

// addTool registers a tool whose failures become tool errors (isError
// results that name what went wrong), never protocol errors or crashes.
func addTool[In any](s *Server, t *mcpsdk.Tool, needsKey bool, fn toolFunc[In]) {
	if t.Annotations == nil {
		t.Annotations = &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
	}
	s.tools = append(s.tools, t.Name)
	mcpsdk.AddTool(s.sdk, t, func(ctx context.Context, req *mcpsdk.CallToolRequest, in In) (res *mcpsdk.CallToolResult, out any, err error) {
		start := time.Now()
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("tool panicked", "tool", t.Name, "panic", v, "stack", string(debug.Stack()))
				res, out, err = toolError(fmt.Errorf("internal error in %s; the server log has the details", t.Name)), nil, nil
			}
		}()
		authz, aerr := s.authorization(req)
		if aerr != nil {
			return toolError(aerr), nil, nil
		}
		if needsKey && authz == "" {
			return toolError(errNoCredential), nil, nil
		}
		out, ferr := fn(ctx, &caller{s: s, authz: authz}, in)
		s.log.Debug("tool call", "tool", t.Name, "ms", time.Since(start).Milliseconds(), "error", ferr)
		if ferr != nil {
			var ae *APIError
			if errors.As(ferr, &ae) {
				s.log.Info("tool call failed", "tool", t.Name, "status", ae.Status, "endpoint", ae.Endpoint)
			}
			return toolError(ferr), nil, nil
		}
		return nil, out, nil
	})
}

// toolError is an isError result: the message as text for the model, and
// the API's status and code as structured content for programs.
func toolError(err error) *mcpsdk.CallToolResult {
	res := &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: err.Error()}}}
	detail := map[string]any{"message": err.Error()}
	var ae *APIError
	switch {
	case errors.As(err, &ae):
		detail["http_status"] = ae.Status
		if ae.Code != "" {
			detail["code"] = ae.Code
		}
		if ae.Detail != "" {
			detail["detail"] = ae.Detail
		}
		if ae.RetryAfter != "" {
			detail["retry_after"] = ae.RetryAfter
		}
	case errors.Is(err, errNoCredential):
		detail["code"] = "not_authenticated"
	}
	res.StructuredContent = map[string]any{"error": detail}
	return res
}

func ptr[T any](v T) *T { return &v }

// quiet passes on only warnings and errors: the SDK logs every stateless
// request's session start and end at info, which drowns what matters.
func quiet(l *slog.Logger) *slog.Logger {
	return slog.New(minLevel{l.Handler(), slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}
func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
