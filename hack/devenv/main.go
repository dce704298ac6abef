// Command devenv is `make dev`: it runs the whole system locally on embedded
// defaults — a control plane (kube-apiserver + etcd built from Go modules),
// the CRDs, the manager with the in-process executor and SQLite, demo tenants —
// writes .dev/env once everything answers, and stays in the foreground until
// interrupted, then stops all it started.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/posture-dev/posture/internal/localsystem"
)

// settings are where the local system keeps its files and listens; the
// addresses can be moved with environment variables when a port is taken.
type settings struct {
	root    string
	devDir  string
	apiAddr string
	mcpAddr string
	// metricsAddr is where the manager serves /metrics (POSTURE_DEV_METRICS_ADDR).
	metricsAddr string
	// aggregatedAddr is where the manager serves data.posture.dev, which the
	// local kube-apiserver reaches through its egress proxy
	// (POSTURE_DEV_AGGREGATED_ADDR).
	aggregatedAddr string
	// managerArgs are extra manager flags (POSTURE_DEV_MANAGER_ARGS), e.g.
	// --ingest-records-per-second to slow ingestions down enough to kill the
	// manager in the middle of one.
	managerArgs []string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := os.Getwd()
	if err == nil {
		devDir := filepath.Join(root, ".dev")
		if len(os.Args) > 1 && os.Args[1] == "reset" {
			err = reset(devDir)
		} else {
			err = run(ctx, settings{
				root:           root,
				devDir:         devDir,
				apiAddr:        envOr("POSTURE_DEV_API_ADDR", "127.0.0.1:8080"),
				mcpAddr:        envOr("POSTURE_DEV_MCP_ADDR", "127.0.0.1:8090"),
				metricsAddr:    envOr("POSTURE_DEV_METRICS_ADDR", "127.0.0.1:8082"),
				aggregatedAddr: envOr("POSTURE_DEV_AGGREGATED_ADDR", "127.0.0.1:8443"),
				managerArgs:    strings.Fields(os.Getenv("POSTURE_DEV_MANAGER_ARGS")),
			})
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "make dev:", err)
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, s settings) error {
	lock, err := lockDevDir(s.devDir)
	if err != nil {
		return err
	}
	defer lock.release()
	for _, addr := range []string{s.apiAddr, s.mcpAddr, s.metricsAddr, s.aggregatedAddr} {
		if err := portFree(addr); err != nil {
			return err
		}
	}
	envFile := filepath.Join(s.devDir, "env")
	_ = os.Remove(envFile)
	for _, bin := range []string{"manager", "mcp-server"} {
		if _, err := os.Stat(filepath.Join(s.root, "bin", bin)); err != nil {
			return fmt.Errorf("bin/%s is missing: run make dev, which builds it first", bin)
		}
	}
	kept, err := keepOrWipe(s.devDir)
	if err != nil {
		return err
	}
	step(kept)

	sys, err := localsystem.Start(ctx, localsystem.Options{
		Dir:            s.devDir,
		EtcdDir:        filepath.Join(s.devDir, etcdDirName),
		BinDir:         filepath.Join(s.root, "bin"),
		APIAddr:        s.apiAddr,
		MCPAddr:        s.mcpAddr,
		MetricsAddr:    s.metricsAddr,
		AggregatedAddr: s.aggregatedAddr,
		StoreDriver:    "sqlite",
		StoreDSN:       filepath.Join(s.devDir, storeName),
		StoreLabel:     "SQLite at .dev/posture.db",
		ManagerArgs:    s.managerArgs,
		Out:            os.Stdout,
		Step:           step,
	})
	if err != nil {
		return err
	}
	defer sys.Stop()
	if err := writeEnv(envFile, sys.Vars); err != nil {
		return err
	}
	defer os.Remove(envFile)

	sys.Programs.Arm()
	fmt.Print(hint(s.root))
	select {
	case <-ctx.Done():
		fmt.Println()
		step("interrupted: shutting down")
		return nil
	case name := <-sys.Programs.Exited():
		return fmt.Errorf("%s keeps exiting; see its lines above", name)
	}
}

// hint is what make dev prints once the system is up. Every path in it is
// one of the repository's or one make dev writes (hack/devenv's tests check).
func hint(root string) string {
	return `
Posture is running locally. In another shell, in ` + root + `:

  source .dev/env
  curl -sS -H "Authorization: Api-Key $POSTURE_API_KEY" \
       -F file=@examples/aws_1500_records.ocsf.json \
       "$POSTURE_API_URL/api/v1/ingestions"
  kubectl get ingestions -n "$POSTURE_TENANT_NAMESPACE"
  kubectl get apiservice v1alpha1.data.posture.dev
  kubectl get findings -n "$POSTURE_TENANT_NAMESPACE" --chunk-size=100
  kubectl get events -n "$POSTURE_TENANT_NAMESPACE"
  curl -sk -H "Authorization: Bearer $POSTURE_METRICS_TOKEN" "$POSTURE_METRICS_URL" | grep ^posture_

The web UI is at $POSTURE_UI_URL: sign in with $POSTURE_ADMIN_EMAIL and
$POSTURE_ADMIN_PASSWORD, or as the viewer ($POSTURE_VIEWER_EMAIL,
$POSTURE_VIEWER_PASSWORD), who cannot import.

examples/README.md lists more reports. To watch crash recovery, kill the manager
during an ingestion (kill -9 $(cat .dev/manager.pid)): make dev restarts it and
the ingestion finishes on its next attempt. The data stays for the next make dev;
make dev-reset wipes it.

Press Ctrl-C to stop everything.
`
}

func step(msg string) { fmt.Printf("==> %s\n", msg) }

func portFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s is taken (%v); set POSTURE_DEV_API_ADDR / POSTURE_DEV_MCP_ADDR to other addresses", addr, err)
	}
	return l.Close()
}

func writeEnv(path string, vars []string) error {
	var b strings.Builder
	b.WriteString("# Written by make dev; valid while it runs. Use: source .dev/env\n")
	for _, v := range vars {
		name, value, _ := strings.Cut(v, "=")
		fmt.Fprintf(&b, "export %s=%q\n", name, value)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
