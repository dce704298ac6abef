// Package node runs Posture on a real one-node Kubernetes cluster
// (internal/localcluster: kubelet, containerd and runc, a CNI bridge,
// kube-proxy and CoreDNS) from the images make images builds, installed with
// the real Helm CLI: the install a platform team starts with. One cluster
// serves the whole test binary; TestMain checks that tearing it down leaves
// nothing behind.
//
// It needs root, as the cluster does (CI runs as root); make test runs it
// after the other packages so the node has the machine to itself.
package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/posture-dev/posture/internal/demo"
	"github.com/posture-dev/posture/internal/localcluster"
	"github.com/posture-dev/posture/internal/testenv"
)

var (
	cluster *localcluster.Cluster
	// workDir holds what the tests write besides the cluster: the images
	// of make images, generated reports.
	workDir string
)

const (
	release   = "posture"
	systemNS  = "posture-system"
	managerLS = "app.kubernetes.io/instance=posture,app.kubernetes.io/component=manager"
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("test/node: not root: the one-node cluster needs root (network namespaces, mounts, cgroups); its tests are skipped")
		os.Exit(m.Run())
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/node:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	root := testenv.Root()
	var err error
	workDir, err = os.MkdirTemp("", "posture-node-work-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(workDir)
	imagesDir := filepath.Join(workDir, "images")
	if err := goRun(root, "./hack/images", "-out", imagesDir); err != nil {
		return 1, fmt.Errorf("make images: %w", err)
	}
	dir, err := localcluster.TempDir()
	if err != nil {
		return 1, err
	}
	before, err := hostIptables()
	if err != nil {
		return 1, err
	}
	// What make cluster runs: the node, helm install with the chart's
	// defaults from these images, the demo tenants, .cluster/env.
	if err := goRun(root, "./hack/cluster", "-dir", dir, "-images", imagesDir, "-owner", strconv.Itoa(os.Getpid()), "up"); err != nil {
		localcluster.Down(dir)
		return 1, fmt.Errorf("make cluster: %w", err)
	}
	if cluster, err = localcluster.Load(dir); err != nil {
		return 1, err
	}
	envFile = filepath.Join(dir, "env")
	code := m.Run()
	// What make cluster-down runs, then what it must have left: nothing.
	state := cluster.State
	if err := goRun(root, "./hack/cluster", "-dir", dir, "down"); err != nil {
		return code, fmt.Errorf("make cluster-down: %w", err)
	}
	if left := state.Leftovers(); len(left) > 0 {
		return code, fmt.Errorf("make cluster-down left: %s", strings.Join(left, "; "))
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		return code, fmt.Errorf("make cluster-down left its state directory %s", dir)
	}
	after, err := hostIptables()
	if err != nil {
		return code, err
	}
	if before != after {
		return code, fmt.Errorf("the host's iptables rules changed while the cluster ran:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	return code, nil
}

// envFile is the cluster's .cluster/env.
var envFile string

func goRun(dir string, args ...string) error {
	cmd := exec.Command("go", append([]string{"run"}, args...)...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// hostIptables is the host's iptables rules, without counters: the
// cluster's own live in its network namespace and must never show here.
func hostIptables() (string, error) {
	out, err := exec.Command("iptables-save").Output()
	if err != nil {
		return "", fmt.Errorf("iptables-save: %w", err)
	}
	var rules []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndex(line, " ["); strings.HasPrefix(line, ":") && i > 0 {
			line = line[:i]
		}
		rules = append(rules, line)
	}
	return strings.Join(rules, "\n"), nil
}

func needCluster(t testing.TB) {
	t.Helper()
	if cluster == nil {
		t.Skip("no cluster: the node tests need root")
	}
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func kube(t testing.TB) client.Client {
	t.Helper()
	cl, err := cluster.Client()
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// kubectl runs the real kubectl with the cluster's admin kubeconfig.
func kubectl(t testing.TB, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", cluster.Kubeconfig()}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func chart() string { return filepath.Join(testenv.Root(), "charts", "posture") }

// installed is the chart's default install (job executor, PostgreSQL, two
// replicas) and the demo tenants, made by the first test that needs it.
var installed struct {
	sync.Mutex
	done bool
	// seconds from helm install to every pod Ready
	took time.Duration
	api  apiClient
}

func install(t testing.TB) apiClient {
	t.Helper()
	return installWith(t, localcluster.Posture{Chart: chart(), StoreSecret: true}, 2)
}

// installWith installs the chart as p says unless an install is there, and
// seeds the demo tenants (kept from an earlier install: the store is
// another, but the tenants are Kubernetes objects).
func installWith(t testing.TB, p localcluster.Posture, replicas int) apiClient {
	t.Helper()
	needCluster(t)
	installed.Lock()
	defer installed.Unlock()
	if installed.done {
		return installed.api
	}
	ctx := ctxFor(t, 5*time.Minute)
	t0 := time.Now()
	if err := cluster.InstallPosture(ctx, p, replicas, true); err != nil {
		t.Fatal(err)
	}
	installed.took = time.Since(t0)
	t.Logf("helm install %s: every pod Ready after %s", strings.Join(p.Set, " "), installed.took.Round(100*time.Millisecond))
	cl := kube(t)
	seed, err := demo.Seed(ctx, cl, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := seed.AwaitKeys(ctx, cl); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, v := range seed.EnvVars {
		k, val, _ := strings.Cut(v, "=")
		vars[k] = val
	}
	var svc corev1.Service
	if err := cl.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "posture-api"}, &svc); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	reachable(t, addr, 30*time.Second)
	installed.api = apiClient{
		base:      "http://" + addr,
		key:       vars["POSTURE_API_KEY"],
		namespace: seed.Namespace,
	}
	installed.done = true
	return installed.api
}

// uninstall removes the release, and waits.
func uninstall(t testing.TB) {
	t.Helper()
	installed.Lock()
	defer installed.Unlock()
	if _, err := cluster.Helm(ctxFor(t, 5*time.Minute), "uninstall", release, "-n", systemNS, "--wait"); err != nil {
		t.Fatal(err)
	}
	installed.done = false
}

// execCommand runs a client program with the host's environment.
func execCommand(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = os.TempDir()
	return cmd
}

// apiClient speaks to the REST API from the host, through the API
// Service's ClusterIP (routed to the node).
type apiClient struct {
	base, key, namespace string
}

func (a apiClient) do(t testing.TB, method, path, contentType string, body io.Reader, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, a.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Api-Key "+a.key)
	req.Header.Set("Accept", "application/vnd.api+json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, data)
		}
	}
	if resp.StatusCode >= 300 {
		t.Logf("%s %s: %s\n%s", method, path, resp.Status, data)
	}
	return resp.StatusCode
}

type ingestion struct {
	Data struct {
		ID         string `json:"id"`
		Attributes struct {
			Status  string `json:"status"`
			Summary struct {
				Total, Processed, Invalid int
			} `json:"summary"`
		} `json:"attributes"`
	} `json:"data"`
}

// upload sends a report as the spec's multipart upload and returns the job id.
func (a apiClient) upload(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", filepath.Base(path))
		if err == nil {
			_, err = io.Copy(part, f)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	var ing ingestion
	if code := a.do(t, http.MethodPost, "/api/v1/ingestions", mw.FormDataContentType(), pr, &ing); code != http.StatusAccepted {
		t.Fatalf("upload %s: status %d, want 202", path, code)
	}
	return ing.Data.ID
}

// get reads an ingestion; a 429 is waited out as its Retry-After says.
func (a apiClient) get(t testing.TB, id string) ingestion {
	t.Helper()
	for {
		var ing ingestion
		switch code := a.do(t, http.MethodGet, "/api/v1/ingestions/"+id, "", nil, &ing); code {
		case http.StatusOK:
			return ing
		case http.StatusTooManyRequests:
			time.Sleep(time.Second)
		default:
			t.Fatalf("GET ingestion %s: %d", id, code)
		}
	}
}

func (i ingestion) ended() bool {
	s := i.Data.Attributes.Status
	return s == "completed" || s == "failed"
}

// wait polls an ingestion until it ends.
func (a apiClient) wait(t testing.TB, id string, timeout time.Duration) ingestion {
	t.Helper()
	var ing ingestion
	testenv.EventuallyEvery(t, timeout, 250*time.Millisecond, "ingestion "+id+" to end", func() (bool, string) {
		ing = a.get(t, id)
		return ing.ended(), ing.Data.Attributes.Status
	})
	return ing
}

// waitStatus polls until the ingestion reaches status (or ends).
func (a apiClient) waitStatus(t testing.TB, id, status string, timeout time.Duration) ingestion {
	t.Helper()
	var ing ingestion
	testenv.EventuallyEvery(t, timeout, 100*time.Millisecond, "ingestion "+id+" to be "+status, func() (bool, string) {
		ing = a.get(t, id)
		return ing.Data.Attributes.Status == status || ing.ended(), ing.Data.Attributes.Status
	})
	return ing
}

func fixture(name string) string { return testenv.Fixture(name) }
