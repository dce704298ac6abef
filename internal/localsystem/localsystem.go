// Package localsystem runs the whole of Posture on this machine, without
// nodes: a control plane (kube-apiserver and etcd) whose aggregator reaches
// a local manager, the CRDs, the admission policies and roles a cluster
// install has, seeded tenants, the manager binary with the in-process
// executor, and the MCP server binary, both kept running by a supervisor.
// make dev runs it on SQLite and keeps its data; make soak runs it on
// PostgreSQL and loads it.
package localsystem

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/posture-dev/posture/internal/demo"
	"github.com/posture-dev/posture/internal/supervise"
	"github.com/posture-dev/posture/internal/testenv"
)

// Options say where the system keeps its files, where it listens and which
// store it uses.
type Options struct {
	// Dir holds the kubeconfig and the programs' pid files.
	Dir string
	// EtcdDir keeps etcd's data there across runs; empty, etcd's data is
	// temporary.
	EtcdDir string
	// BinDir holds the manager and mcp-server binaries.
	BinDir string
	// APIAddr serves the REST API and the web UI, MCPAddr the MCP server,
	// MetricsAddr the manager's /metrics, and AggregatedAddr
	// data.posture.dev, which kube-apiserver reaches through its egress
	// proxy.
	APIAddr, MCPAddr, MetricsAddr, AggregatedAddr string
	// StoreDriver and StoreDSN are the manager's --store-driver and
	// --store-dsn; StoreLabel says in the log what they are.
	StoreDriver, StoreDSN, StoreLabel string
	// ManagerArgs are more manager flags (later ones win).
	ManagerArgs []string
	// Tenants are seeded; nil seeds the demo tenants (demo.Tenants). The
	// first one gets the MCPServer.
	Tenants []demo.Tenant
	// Out receives the programs' lines, each prefixed with its name.
	Out io.Writer
	// Step is told each step, and what the supervisor does.
	Step func(string)
}

// System is a running local system.
type System struct {
	// Config is the control plane's administrator; Admin a client as them.
	Config *rest.Config
	Admin  client.Client
	// Kubeconfig is a file for kubectl, as the same administrator.
	Kubeconfig string
	APIURL     string
	MCPURL     string
	Seed       *demo.Seeded
	// Vars are the lines of an env file (NAME=value) for the system.
	Vars []string
	// Programs are the manager and the MCP server. Arm them once the
	// system is handed over, so that a crash is restarted.
	Programs *supervise.Group

	env     *envtest.Environment
	route   *testenv.AggregatorRoute
	stepped func(string)
}

// ManagerName and MCPServerName are the programs' names in Programs.
const (
	ManagerName   = "manager"
	MCPServerName = "mcp-server"
)

// Start brings the system up and returns once everything answers, or stops
// what it started and says what failed.
func Start(ctx context.Context, o Options) (_ *System, err error) {
	if o.Step == nil {
		o.Step = func(string) {}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Tenants == nil {
		o.Tenants = demo.Tenants
	}
	for _, bin := range []string{ManagerName, MCPServerName} {
		if _, err := os.Stat(filepath.Join(o.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("%s is missing: build it first (make dev and make soak do)", filepath.Join(o.BinDir, bin))
		}
	}
	step := o.Step
	s := &System{stepped: step}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()

	// A fresh route each run: its certificates and socket are not kept, and
	// Register brings a kept APIService's caBundle up to date. The socket
	// lives in a short temporary path (Unix socket paths are limited).
	if s.route, err = testenv.NewAggregatorRoute("", "posture-system"); err != nil {
		return nil, err
	}
	s.route.SetBackend(o.AggregatedAddr)

	step("starting the control plane (kube-apiserver + etcd, front proxy and egress to the local manager)")
	opts := []testenv.Option{s.route.Option()}
	if o.EtcdDir != "" {
		opts = append(opts, testenv.EtcdDataDir(o.EtcdDir))
	}
	if s.env, s.Config, err = testenv.Start(opts...); err != nil {
		return nil, err
	}
	if s.Kubeconfig, err = writeKubeconfig(s.env, o.Dir); err != nil {
		return nil, err
	}
	if s.Admin, err = client.New(s.Config, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return nil, err
	}

	// As a cluster installed from config/default would: the seed below acts
	// as the control plane's admin, whom the policies allow.
	step("installing the admission policies (config/admission)")
	if err := testenv.InstallAdmissionPolicies(ctx, s.Admin); err != nil {
		return nil, err
	}
	step("installing the aggregated API's roles (config/rbac/aggregated_api_roles.yaml)")
	if err := testenv.ApplyFile(ctx, s.Admin, "config/rbac/aggregated_api_roles.yaml"); err != nil {
		return nil, err
	}
	// No kube-controller-manager runs here to fill view, edit and admin from
	// the roles aggregated into them; without this, view granted nothing.
	step("aggregating ClusterRoles into view, edit and admin")
	if err := testenv.AggregateClusterRoles(ctx, s.Admin); err != nil {
		return nil, err
	}

	step("seeding demo tenants")
	if s.Seed, err = demo.SeedTenants(ctx, s.Admin, o.Tenants, step); err != nil {
		return nil, err
	}

	s.Programs = supervise.New(o.Dir, o.Out, step)
	s.APIURL = "http://" + o.APIAddr
	managerEnv := append(os.Environ(), "KUBECONFIG="+s.Kubeconfig, "POD_NAMESPACE=posture-system")
	managerArgs := []string{
		"--api-bind-address=" + o.APIAddr,
		"--health-probe-bind-address=127.0.0.1:0",
		// HTTPS with the same token check as in a cluster (self-signed).
		"--metrics-bind-address=" + o.MetricsAddr,
		"--aggregated-api-bind-address=" + o.AggregatedAddr,
		"--aggregated-api-cert-dir=" + s.route.ServingCertDir,
		"--executor=inprocess",
		"--store-driver=" + o.StoreDriver,
		"--store-dsn=" + o.StoreDSN,
		// No image is pulled here (no nodes); the name shows what would run.
		"--mcp-image=posture/mcp-server:dev",
	}
	managerArgs = append(managerArgs, o.ManagerArgs...)
	step("starting the manager (in-process executor, " + o.StoreLabel + ")")
	if err := s.Programs.Start(ctx, supervise.Spec{Name: ManagerName, Path: filepath.Join(o.BinDir, ManagerName),
		Args: managerArgs, Env: managerEnv, HealthURL: s.APIURL + "/healthz"}); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, s.APIURL+"/healthz", s.Programs); err != nil {
		return nil, fmt.Errorf("the API never answered: %w (see the manager's lines above)", err)
	}
	step("registering the aggregated API (APIService v1alpha1.data.posture.dev)")
	if err := s.route.Register(ctx, s.Admin); err != nil {
		return nil, err
	}
	waitCtx, cancelWait := context.WithTimeout(ctx, time.Minute)
	err = testenv.WaitAvailable(waitCtx, s.Admin)
	cancelWait()
	if err != nil {
		return nil, err
	}
	step("waiting for the demo API keys")
	if err := s.Seed.AwaitKeys(ctx, s.Admin); err != nil {
		return nil, err
	}

	if s.MCPURL, err = startMCP(ctx, s, o); err != nil {
		return nil, err
	}
	scrapeToken, err := metricsToken(ctx, s.Config, s.Admin)
	if err != nil {
		return nil, err
	}
	s.Vars = []string{
		"KUBECONFIG=" + s.Kubeconfig,
		"POSTURE_API_URL=" + s.APIURL,
		// The manager serves the web UI at / on the API's address.
		"POSTURE_UI_URL=" + s.APIURL + "/",
		"POSTURE_TENANT_NAMESPACE=" + s.Seed.Namespace,
		"POSTURE_METRICS_URL=https://" + o.MetricsAddr + "/metrics",
		// A day's token of ServiceAccount posture-system/posture-metrics-reader.
		"POSTURE_METRICS_TOKEN=" + scrapeToken,
		"POSTURE_MCP_URL=" + s.MCPURL,
	}
	s.Vars = append(s.Vars, s.Seed.EnvVars...)
	s.Vars = append(s.Vars, demo.PushVars(s.Vars, s.APIURL)...)
	return s, nil
}

// Stop stops the programs, then the control plane.
func (s *System) Stop() {
	if s.Programs != nil {
		s.Programs.StopAll()
	}
	if s.env != nil {
		s.stepped("stopping the control plane")
		_ = s.env.Stop()
	}
	if s.route != nil {
		_ = s.route.Close()
		_ = os.RemoveAll(s.route.Dir)
	}
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

// waitHTTP waits for url to answer 200, or for a program to exit.
func waitHTTP(ctx context.Context, url string, programs *supervise.Group) error {
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
		case name := <-programs.Exited():
			return fmt.Errorf("%s exited", name)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
