// Command devenv is `make dev`: it runs the whole system locally on embedded
// defaults — a control plane (kube-apiserver + etcd built from Go modules),
// the CRDs, the manager with the in-process executor and SQLite, demo tenants —
// writes .dev/env once everything answers, and stays in the foreground until
// interrupted, then stops all it started.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/posture-dev/posture/internal/testenv"
)

// settings are the addresses the local system listens on; each can be moved
// with an environment variable when a port is taken.
type settings struct {
	root    string
	devDir  string
	apiAddr string
	mcpAddr string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
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

func run(ctx context.Context) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	s := settings{
		root:    root,
		devDir:  filepath.Join(root, ".dev"),
		apiAddr: envOr("POSTURE_DEV_API_ADDR", "127.0.0.1:8080"),
		mcpAddr: envOr("POSTURE_DEV_MCP_ADDR", "127.0.0.1:8090"),
	}
	for _, addr := range []string{s.apiAddr, s.mcpAddr} {
		if err := portFree(addr); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(s.devDir, 0o700); err != nil {
		return err
	}
	envFile := filepath.Join(s.devDir, "env")
	// Every run starts from an empty control plane, so the store starts empty
	// too: rows of objects that no longer exist would only confuse.
	for _, stale := range []string{envFile, "posture.db", "posture.db-wal", "posture.db-shm"} {
		_ = os.Remove(filepath.Join(s.devDir, filepath.Base(stale)))
	}
	for _, bin := range []string{"manager"} {
		if _, err := os.Stat(filepath.Join(root, "bin", bin)); err != nil {
			return fmt.Errorf("bin/%s is missing: run make dev, which builds it first", bin)
		}
	}

	step("starting the control plane (kube-apiserver + etcd)")
	env, _, err := testenv.Start()
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

	step("seeding demo tenants")
	seed, err := seedTenants(ctx, admin)
	if err != nil {
		return err
	}

	var procs processes
	defer procs.stopAll()

	step("starting the manager (in-process executor, SQLite at .dev/posture.db)")
	managerEnv := append(os.Environ(), "KUBECONFIG="+kubeconfig, "POD_NAMESPACE=posture-system")
	managerEnv = append(managerEnv, seed.managerEnv...)
	managerArgs := []string{
		"--api-bind-address=" + s.apiAddr,
		"--health-probe-bind-address=127.0.0.1:0",
		"--executor=inprocess",
		"--store-driver=sqlite",
		"--store-dsn=" + filepath.Join(s.devDir, "posture.db"),
		// No image is pulled here (no nodes); the name shows what would run.
		"--mcp-image=posture/mcp-server:dev",
	}
	managerArgs = append(managerArgs, seed.managerArgs...)
	if err := procs.start(ctx, "manager", filepath.Join(root, "bin", "manager"), managerArgs, managerEnv); err != nil {
		return err
	}
	apiURL := "http://" + s.apiAddr
	if err := waitHTTP(ctx, apiURL+"/healthz", &procs); err != nil {
		return fmt.Errorf("the API never answered: %w (see the manager's lines above)", err)
	}
	step("waiting for the demo API keys")
	if err := seed.awaitKeys(ctx, admin); err != nil {
		return err
	}

	mcpURL, err := startMCP(ctx, &procs, s, apiURL, seed)
	if err != nil {
		return err
	}

	vars := []string{
		"KUBECONFIG=" + kubeconfig,
		"POSTURE_API_URL=" + apiURL,
		// The web UI is served by the API server once it exists; no UI is built yet.
		"POSTURE_UI_URL=" + apiURL,
		"POSTURE_TENANT_NAMESPACE=" + seed.namespace,
	}
	if mcpURL != "" {
		vars = append(vars, "POSTURE_MCP_URL="+mcpURL)
	}
	vars = append(vars, seed.envVars...)
	if err := writeEnv(envFile, vars); err != nil {
		return err
	}
	defer os.Remove(envFile)

	fmt.Printf(`
Posture is running locally. In another shell:

  source .dev/env
  curl -sS -H "Authorization: Api-Key $POSTURE_API_KEY" \
       -F file=@../shared/fixtures/ocsf/prowler/aws_1500_records.ocsf.json \
       "$POSTURE_API_URL/api/v1/ingestions"
  kubectl get ingestions -n "$POSTURE_TENANT_NAMESPACE"
  kubectl get events -n "$POSTURE_TENANT_NAMESPACE"

Press Ctrl-C to stop everything.
`)
	select {
	case <-ctx.Done():
		fmt.Println()
		step("interrupted: shutting down")
		return nil
	case name := <-procs.exited:
		return fmt.Errorf("%s exited unexpectedly", name)
	}
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

// processes are the child programs of the dev environment.
type processes struct {
	mu     sync.Mutex
	procs  []*process
	exited chan string
}

type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *processes) start(ctx context.Context, name, path string, args, env []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil {
		p.exited = make(chan string, 8)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	proc := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go prefixLines(os.Stdout, "["+name+"] ", stdout)
	go func() {
		_ = cmd.Wait()
		close(proc.done)
		if ctx.Err() == nil {
			p.exited <- name
		}
	}()
	p.procs = append(p.procs, proc)
	return nil
}

// stopAll sends SIGTERM in reverse start order and waits for each to leave.
func (p *processes) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.procs) - 1; i >= 0; i-- {
		proc := p.procs[i]
		select {
		case <-proc.done:
			continue
		default:
		}
		step("stopping " + proc.name)
		_ = proc.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-proc.done:
		case <-time.After(15 * time.Second):
			_ = proc.cmd.Process.Kill()
			<-proc.done
		}
	}
}

func prefixLines(w io.Writer, prefix string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintln(w, prefix+sc.Text())
	}
}
