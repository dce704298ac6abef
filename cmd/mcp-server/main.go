// Command mcp-server is Posture's MCP tool server. It speaks streamable HTTP
// (stateless, at /mcp, with /healthz) for managed and self-hosted use, or
// STDIO when an MCP client starts it as a local subprocess.
//
//	mcp-server --transport http --addr :8080 --api-base-url http://posture-api:8080/api/v1
//	PROWLER_API_KEY=pk_… API_BASE_URL=https://…/api/v1 mcp-server --transport stdio
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	// The images hold a static binary and no CA bundle: when the system has
	// no roots, TLS to a report URL, a database or an API falls back to the
	// Mozilla roots compiled in.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/posture-dev/posture/docs"
	"github.com/posture-dev/posture/internal/mcp"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

// Environment variables. PROWLER_API_KEY and API_BASE_URL are the names the
// product spec gives for a local server; the default key of an HTTP server
// has its own name so that a key in a developer's shell never silently
// becomes the identity of every anonymous HTTP client.
const (
	envAPIKey        = "PROWLER_API_KEY"
	envAPIBaseURL    = "API_BASE_URL"
	envDefaultAPIKey = "POSTURE_MCP_DEFAULT_API_KEY"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

type options struct {
	transport           string
	addr                string
	apiBaseURL          string
	defaultKeyFile      string
	maxRequestBytes     int64
	logLevel            string
	logFormat           string
	showVersion         bool
	shutdownGracePeriod time.Duration
}

func run(args []string, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("mcp-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.transport, "transport", "stdio", "stdio (a local subprocess of an MCP client) or http (streamable HTTP, stateless)")
	fs.StringVar(&o.addr, "addr", ":8080", "HTTP transport: address to listen on")
	fs.StringVar(&o.apiBaseURL, "api-base-url", "", "Posture API address, {base_url}/api/v1 (default: $"+envAPIBaseURL+", else "+mcp.DefaultAPIBaseURL+")")
	fs.StringVar(&o.defaultKeyFile, "default-api-key-file", "", "HTTP transport: file holding an API key used for clients that send none (off by default; also $"+envDefaultAPIKey+")")
	fs.Int64Var(&o.maxRequestBytes, "max-request-bytes", mcp.DefaultMaxRequestBytes, "HTTP transport: largest MCP message, and so the largest report upload_report takes as content")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json (logs go to stderr; stdout belongs to the STDIO transport)")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	fs.DurationVar(&o.shutdownGracePeriod, "shutdown-grace-period", 10*time.Second, "HTTP transport: how long in-flight requests may finish after SIGTERM")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcp-server: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if o.showVersion {
		fmt.Fprintln(stderr, buildVersion())
		return 0
	}
	log, err := newLogger(stderr, o.logLevel, o.logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "mcp-server:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, o, log, stderr); err != nil {
		log.Error("mcp-server stopped", "error", err.Error())
		return 1
	}
	return 0
}

func serve(ctx context.Context, o options, log *slog.Logger, stderr io.Writer) error {
	base := o.apiBaseURL
	if base == "" {
		base = os.Getenv(envAPIBaseURL)
	}
	if base == "" {
		base = mcp.DefaultAPIBaseURL
	}
	cfg := mcp.Config{
		APIBaseURL:      base,
		Docs:            docs.FS,
		Logger:          log,
		Version:         buildVersion(),
		MaxRequestBytes: o.maxRequestBytes,
	}
	switch o.transport {
	case "stdio":
		if o.defaultKeyFile != "" {
			return errors.New("--default-api-key-file is for the HTTP transport; a STDIO server uses $" + envAPIKey)
		}
		cfg.DefaultToken = strings.TrimSpace(os.Getenv(envAPIKey))
		cfg.LocalFiles = true
		srv, err := mcp.New(cfg)
		if err != nil {
			return err
		}
		if cfg.DefaultToken == "" {
			log.Warn("no " + envAPIKey + " set: documentation tools work, platform tools will answer that they need an API key")
		}
		log.Info("serving MCP over STDIO", "api", srv.APIBaseURL(), "tools", len(srv.Tools()))
		err = srv.RunStdio(ctx)
		if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	case "http":
		key, err := defaultKey(o.defaultKeyFile)
		if err != nil {
			return err
		}
		if os.Getenv(envAPIKey) != "" {
			log.Info(envAPIKey + " is ignored by the HTTP transport: clients send their own key (a server-side default comes from --default-api-key-file or $" + envDefaultAPIKey + ")")
		}
		cfg.DefaultToken = key
		srv, err := mcp.New(cfg)
		if err != nil {
			return err
		}
		return serveHTTP(ctx, o, srv, log, stderr, key != "")
	default:
		return fmt.Errorf("unknown --transport %q: use stdio or http", o.transport)
	}
}

func defaultKey(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--default-api-key-file: %w", err)
		}
		key := strings.TrimSpace(string(b))
		if key == "" {
			return "", fmt.Errorf("--default-api-key-file %s is empty", file)
		}
		return key, nil
	}
	return strings.TrimSpace(os.Getenv(envDefaultAPIKey)), nil
}

func serveHTTP(ctx context.Context, o options, srv *mcp.Server, log *slog.Logger, stderr io.Writer, hasDefaultKey bool) error {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	// One plain line with the bound address, for people and for tests that
	// listen on port 0.
	fmt.Fprintf(stderr, "mcp-server: listening on http://%s/mcp\n", ln.Addr())
	log.Info("serving MCP over streamable HTTP (stateless)", "addr", ln.Addr().String(), "api", srv.APIBaseURL(),
		"tools", len(srv.Tools()), "default_key", hasDefaultKey)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), o.shutdownGracePeriod)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
