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
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/posture-dev/posture/internal/demo"
	"github.com/posture-dev/posture/internal/testenv"
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
	for _, bin := range []string{"manager"} {
		if _, err := os.Stat(filepath.Join(s.root, "bin", bin)); err != nil {
			return fmt.Errorf("bin/%s is missing: run make dev, which builds it first", bin)
		}
	}
	kept, err := keepOrWipe(s.devDir)
	if err != nil {
		return err
	}
	step(kept)

	// A fresh route each run: its certificates and socket are not kept, and
	// Register brings the kept APIService's caBundle up to date. The socket
	// lives in a short temporary path (Unix socket paths are limited).
	route, err := testenv.NewAggregatorRoute("", "posture-system")
	if err != nil {
		return err
	}
	defer func() {
		_ = route.Close()
		_ = os.RemoveAll(route.Dir)
	}()
	route.SetBackend(s.aggregatedAddr)

	step("starting the control plane (kube-apiserver + etcd, front proxy and egress to the local manager)")
	env, _, err := testenv.Start(testenv.EtcdDataDir(filepath.Join(s.devDir, etcdDirName)), route.Option())
	if err != nil {
		return err
	}
	defer func() {
		step("stopping the control plane")
		_ = env.Stop()
	}()
	kubeconfig, err := writeKubeconfig(env, s.devDir)
	if err != nil {
		return err
	}
	admin, err := adminClient(env)
	if err != nil {
		return err
	}

	// As a cluster installed from config/default would: the seed below acts
	// as the control plane's admin, whom the policies allow.
	step("installing the admission policies (config/admission)")
	if err := testenv.InstallAdmissionPolicies(ctx, admin); err != nil {
		return err
	}

	step("installing the aggregated API's roles (config/rbac/aggregated_api_roles.yaml)")
	if err := testenv.ApplyFile(ctx, admin, "config/rbac/aggregated_api_roles.yaml"); err != nil {
		return err
	}
	// No kube-controller-manager runs here to fill view, edit and admin from
	// the roles aggregated into them; without this, view granted nothing.
	step("aggregating ClusterRoles into view, edit and admin")
	if err := testenv.AggregateClusterRoles(ctx, admin); err != nil {
		return err
	}

	step("seeding demo tenants")
	seed, err := demo.Seed(ctx, admin, step)
	if err != nil {
		return err
	}

	procs := newProcesses(s.devDir)
	defer procs.stopAll()

	apiURL := "http://" + s.apiAddr
	managerEnv := append(os.Environ(), "KUBECONFIG="+kubeconfig, "POD_NAMESPACE=posture-system")
	managerArgs := []string{
		"--api-bind-address=" + s.apiAddr,
		"--health-probe-bind-address=127.0.0.1:0",
		// HTTPS with the same token check as in a cluster (self-signed).
		"--metrics-bind-address=" + s.metricsAddr,
		"--aggregated-api-bind-address=" + s.aggregatedAddr,
		"--aggregated-api-cert-dir=" + route.ServingCertDir,
		"--executor=inprocess",
		"--store-driver=sqlite",
		"--store-dsn=" + filepath.Join(s.devDir, storeName),
		// No image is pulled here (no nodes); the name shows what would run.
		"--mcp-image=posture/mcp-server:dev",
	}
	managerArgs = append(managerArgs, s.managerArgs...)
	step("starting the manager (in-process executor, SQLite at .dev/posture.db)")
	if err := procs.start(ctx, spec{name: "manager", path: filepath.Join(s.root, "bin", "manager"),
		args: managerArgs, env: managerEnv, healthURL: apiURL + "/healthz"}); err != nil {
		return err
	}
	if err := waitHTTP(ctx, apiURL+"/healthz", procs); err != nil {
		return fmt.Errorf("the API never answered: %w (see the manager's lines above)", err)
	}
	step("registering the aggregated API (APIService v1alpha1.data.posture.dev)")
	if err := route.Register(ctx, admin); err != nil {
		return err
	}
	waitCtx, cancelWait := context.WithTimeout(ctx, time.Minute)
	err = testenv.WaitAvailable(waitCtx, admin)
	cancelWait()
	if err != nil {
		return err
	}
	step("waiting for the demo API keys")
	if err := seed.AwaitKeys(ctx, admin); err != nil {
		return err
	}

	mcpURL, err := startMCP(ctx, procs, s, apiURL, seed)
	if err != nil {
		return err
	}
	scrapeToken, err := metricsToken(ctx, env.Config, admin)
	if err != nil {
		return err
	}

	vars := []string{
		"KUBECONFIG=" + kubeconfig,
		"POSTURE_API_URL=" + apiURL,
		// The manager serves the web UI at / on the API's address.
		"POSTURE_UI_URL=" + apiURL + "/",
		"POSTURE_TENANT_NAMESPACE=" + seed.Namespace,
		"POSTURE_METRICS_URL=https://" + s.metricsAddr + "/metrics",
		// A day's token of ServiceAccount posture-system/posture-metrics-reader.
		"POSTURE_METRICS_TOKEN=" + scrapeToken,
	}
	if mcpURL != "" {
		vars = append(vars, "POSTURE_MCP_URL="+mcpURL)
	}
	vars = append(vars, seed.EnvVars...)
	vars = append(vars, demo.PushVars(vars, apiURL)...)
	if err := writeEnv(envFile, vars); err != nil {
		return err
	}
	defer os.Remove(envFile)

	procs.arm()
	fmt.Print(hint(s.root))
	select {
	case <-ctx.Done():
		fmt.Println()
		step("interrupted: shutting down")
		return nil
	case name := <-procs.exited:
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

// writeKubeconfig gives kubectl an administrator of the local control plane.
func writeKubeconfig(env *envtest.Environment, dir string) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "dev-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("create the kubeconfig user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

func adminClient(env *envtest.Environment) (client.Client, error) {
	return client.New(env.Config, client.Options{Scheme: testenv.Scheme()})
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

func waitHTTP(ctx context.Context, url string, procs *processes) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer from %s within 90s", url)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case name := <-procs.exited:
			return fmt.Errorf("%s exited", name)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
