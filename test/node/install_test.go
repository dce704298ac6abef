package node

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/localcluster"
	"github.com/posture-dev/posture/internal/reportgen"
	"github.com/posture-dev/posture/internal/testenv"
)

// The tests below run in this order on one install (each makes the install
// it needs when run alone): install, the three ways in, MCP, the leader's
// death and an upgrade under load, the in-cluster scanner, uninstall, and
// an install on SQLite.

// TestHelmInstallWithDefaults installs the chart with its default values,
// from the images built here: two manager replicas running as 65532 on a
// read-only root, the job executor, PostgreSQL, and the aggregated API
// Available through its Service.
func TestHelmInstallWithDefaults(t *testing.T) {
	install(t)
	procs := nodeProcesses("")
	if len(procs) != 2 {
		t.Fatalf("found %d manager processes on the node, want the 2 replicas", len(procs))
	}
	for _, p := range procs {
		if p.uid != "65532" {
			t.Errorf("manager process %d runs as uid %s, want 65532", p.pid, p.uid)
		}
		if !p.readOnlyRoot {
			t.Errorf("manager process %d has a writable root filesystem", p.pid)
		}
	}
}

// nodeProcess is a container process as the host sees it.
type nodeProcess struct {
	pid          int
	uid          string
	readOnlyRoot bool
	rssKiB       int
}

// nodeProcesses finds the manager image's processes on the node: the
// binary /manager under the cluster's cgroups, the manager itself (arg "")
// or a worker Job's (arg "worker").
func nodeProcesses(arg string) []nodeProcess {
	entries, _ := os.ReadDir("/proc")
	var out []nodeProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(cmdline), "\x00")
		if args[0] != "/manager" || len(args) < 2 || (args[1] == "worker") != (arg == "worker") {
			continue
		}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if !strings.Contains(string(cg), cluster.State.CgroupRoot+"/") {
			continue
		}
		p := nodeProcess{pid: pid}
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, line := range strings.Split(string(status), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) > 1 && f[0] == "Uid:":
				p.uid = f[1]
			case len(f) > 1 && f[0] == "VmRSS:":
				p.rssKiB, _ = strconv.Atoi(f[1])
			}
		}
		mi, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", pid))
		if err == nil {
			sc := bufio.NewScanner(mi)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) > 5 && f[4] == "/" {
					p.readOnlyRoot = strings.Split(f[5], ",")[0] == "ro"
				}
			}
			mi.Close()
		}
		out = append(out, p)
	}
	return out
}

// TestUploadRunsInWorkerJobPod uploads the 1,500-record report through the
// REST API: a worker Job's pod parses it and ends Succeeded, and the
// counts are exact.
func TestUploadRunsInWorkerJobPod(t *testing.T) {
	api := install(t)
	phases := watchWorkerPods(t)
	id := api.upload(t, fixture("aws_1500_records.ocsf.json"))
	ing := api.wait(t, id, 3*time.Minute)
	s := ing.Data.Attributes.Summary
	if ing.Data.Attributes.Status != "completed" || s.Total != 1500 || s.Processed != 1500 || s.Invalid != 0 {
		t.Fatalf("ingestion %s: %s %+v, want completed with 1500 processed and none invalid", id, ing.Data.Attributes.Status, s)
	}
	pod := phases.waitFor(t, id, corev1.PodSucceeded, time.Minute)
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("worker pod %s mounts a ServiceAccount token; workers need no Kubernetes credentials", pod.Name)
	}
	if sc := pod.Spec.Containers[0].SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("worker pod %s: container without a read-only root filesystem", pod.Name)
	}
}

// workerPods records the phases the worker pods of each ingestion went
// through, from a watch started before the upload: a Succeeded pod may be
// gone by the time anyone lists.
type workerPods struct {
	mu   sync.Mutex
	seen map[string][]corev1.Pod // by ingestion name
}

func watchWorkerPods(t testing.TB) *workerPods {
	t.Helper()
	cfg, err := cluster.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := ctxFor(t, 30*time.Minute)
	w, err := cs.CoreV1().Pods(systemNS).Watch(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=ingestion-worker"})
	if err != nil {
		t.Fatal(err)
	}
	wp := &workerPods{seen: map[string][]corev1.Pod{}}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			wp.mu.Lock()
			name := pod.Labels[posturev1.LabelIngestion]
			wp.seen[name] = append(wp.seen[name], *pod)
			wp.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return wp
}

func (w *workerPods) waitFor(t testing.TB, ingestion string, phase corev1.PodPhase, timeout time.Duration) corev1.Pod {
	t.Helper()
	var found corev1.Pod
	testenv.EventuallyEvery(t, timeout, 100*time.Millisecond, fmt.Sprintf("a worker pod of ingestion %s in phase %s", ingestion, phase), func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		var phases []string
		for _, p := range w.seen[ingestion] {
			if p.Status.Phase == phase {
				found = p
				return true, ""
			}
			phases = append(phases, p.Name+":"+string(p.Status.Phase))
		}
		return false, fmt.Sprintf("seen: %v", phases)
	})
	return found
}

// TestAggregatedUploadReachesManagerPod uploads with kubectl create --raw:
// kube-apiserver's aggregator reaches the manager pods through the
// aggregated API's Service (no egress selector), and the Ingestion it
// answers completes.
func TestAggregatedUploadReachesManagerPod(t *testing.T) {
	api := install(t)
	out := kubectl(t, nil, "create", "--raw",
		"/apis/data.posture.dev/v1alpha1/namespaces/"+api.namespace+"/uploads?filename=three.ocsf.json",
		"-f", fixture("aws_3_records.ocsf.json"))
	var created posturev1.Ingestion
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("the upload's answer is not an Ingestion: %v\n%s", err, out)
	}
	ing := api.wait(t, created.Name, 2*time.Minute)
	if s := ing.Data.Attributes.Summary; ing.Data.Attributes.Status != "completed" || s.Total != 3 || s.Processed != 3 || s.Invalid != 0 {
		t.Fatalf("ingestion %s: %s %+v, want completed with 3 processed", created.Name, ing.Data.Attributes.Status, s)
	}
	names := kubectl(t, nil, "get", "findings", "-n", api.namespace, "--field-selector", "ingestion="+created.Name, "-o", "name")
	if n := len(strings.Fields(names)); n != 3 {
		t.Fatalf("kubectl get findings of ingestion %s: %d, want 3\n%s", created.Name, n, names)
	}
}

// TestMCPServerServesFromItsPod creates an MCPServer: the operator's
// Deployment runs the MCP image on the node, its pod becomes Ready, and the
// real MCP Inspector lists its tools and calls one that reads the API
// through cluster DNS.
func TestMCPServerServesFromItsPod(t *testing.T) {
	api := install(t)
	ctx := ctxFor(t, 3*time.Minute)
	cl := kube(t)
	m := &posturev1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "e2e", Namespace: api.namespace}}
	if err := cl.Create(ctx, m); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The operator creates the Deployment: until it has, there is nothing
	// to roll out.
	testenv.EventuallyEvery(t, time.Minute, time.Second, "the MCPServer's Deployment to roll out", func() (bool, string) {
		err := cluster.WaitRollout(ctx, api.namespace, "e2e", 2*time.Minute)
		return err == nil, fmt.Sprint(err)
	})
	var svc corev1.Service
	if err := cl.Get(ctx, client.ObjectKey{Namespace: api.namespace, Name: "e2e"}, &svc); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	// Ready pods come before kube-proxy's rules for a new Service's
	// endpoints; a client would retry the same way.
	reachable(t, addr, 30*time.Second)
	url := "http://" + addr + "/mcp"
	target := []string{url, "--transport", "http", "--header", "Authorization: Bearer " + api.key}
	res := inspector(t, append(target, "--method", "tools/list")...)
	var tools struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal([]byte(res), &tools); err != nil {
		t.Fatalf("tools/list: %v\n%s", err, res)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	for _, want := range []string{"list_ingestions", "upload_report", "get_tenant_usage", "search_docs"} {
		if !names[want] {
			t.Errorf("tools/list from the MCPServer's pod lacks %s (has %v)", want, names)
		}
	}
	// The server reaches the API at posture-api.posture-system.svc: cluster DNS
	// and the API Service, from a pod.
	res = inspector(t, append(target, "--method", "tools/call", "--tool-name", "get_tenant_usage")...)
	if !strings.Contains(res, `\"namespace\":\"`+api.namespace+`\"`) && !strings.Contains(res, `"namespace":"`+api.namespace+`"`) {
		t.Fatalf("get_tenant_usage through the MCPServer's pod did not answer tenant %s:\n%s", api.namespace, res)
	}
}

// reachable waits until a TCP connection to addr succeeds.
func reachable(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	testenv.EventuallyEvery(t, timeout, 200*time.Millisecond, addr+" to accept a connection", func() (bool, string) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
}

// inspector runs the real MCP Inspector (test/node_modules, pinned) in CLI
// mode and returns what it printed.
func inspector(t testing.TB, args ...string) string {
	t.Helper()
	cmd := execCommand(inspectorBin(t), append([]string{"--cli"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mcp-inspector %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func inspectorBin(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(testenv.Root(), "test", "node_modules", ".bin", "mcp-inspector")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: hack/test-deps.sh installs it (make test runs it)", bin)
	}
	return bin
}

// report100k writes a 100,000-record report once per test binary.
var report100k = sync.OnceValues(func() (string, error) {
	g, err := reportgen.New()
	if err != nil {
		return "", err
	}
	path := filepath.Join(workDir, "big.ocsf.json")
	_, err = g.WriteFile(path, 100_000)
	return path, err
})

func bigReport(t testing.TB) string {
	t.Helper()
	path, err := report100k()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// leader is the manager pod holding the leader-election Lease.
func leader(t testing.TB) string {
	t.Helper()
	var lease coordinationv1.Lease
	if err := kube(t).Get(ctxFor(t, 10*time.Second), client.ObjectKey{Namespace: systemNS, Name: "manager.posture.dev"}, &lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	pod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return pod
}

// TestLeaderPodDiesMidIngestion deletes the leader's pod while a 100,000-
// record ingestion runs: the other replica takes the lease over, goes on
// following the worker Job, and the counts are exact.
func TestLeaderPodDiesMidIngestion(t *testing.T) {
	api := install(t)
	report := bigReport(t)
	id := api.upload(t, report)
	api.waitStatus(t, id, "processing", 2*time.Minute)
	old := leader(t)
	if old == "" {
		t.Fatal("no manager holds the leader-election Lease")
	}
	kubectl(t, nil, "delete", "pod", "-n", systemNS, old, "--wait=false")
	testenv.EventuallyEvery(t, 90*time.Second, 500*time.Millisecond, "another replica to take the lease over from "+old, func() (bool, string) {
		now := leader(t)
		if now != "" && now != old {
			t.Logf("leader %s deleted; %s took over", old, now)
			return true, ""
		}
		return false, "the lease holder is " + now
	})
	ing := api.wait(t, id, 5*time.Minute)
	if s := ing.Data.Attributes.Summary; ing.Data.Attributes.Status != "completed" || s.Total != 100_000 || s.Processed != 100_000 || s.Invalid != 0 {
		t.Fatalf("ingestion %s after the leader died: %s %+v, want completed with 100000 processed", id, ing.Data.Attributes.Status, s)
	}
	if err := cluster.WaitRollout(ctxFor(t, 3*time.Minute), systemNS, release, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestHelmUpgradeWhileIngesting upgrades the release with a changed value
// while an ingestion runs: the manager pods roll, and the ingestion still
// completes with exact counts.
func TestHelmUpgradeWhileIngesting(t *testing.T) {
	api := install(t)
	id := api.upload(t, bigReport(t))
	api.waitStatus(t, id, "processing", 2*time.Minute)
	ctx := ctxFor(t, 5*time.Minute)
	if _, err := cluster.Helm(ctx, "upgrade", release, chart(), "-n", systemNS, "--reuse-values", "--set", "api.shutdownDrain=20s"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitRollout(ctx, systemNS, release, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	var dep struct {
		Spec struct {
			Template struct {
				Spec corev1.PodSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(kubectl(t, nil, "get", "deployment", "-n", systemNS, release, "-o", "json")), &dep); err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--shutdown-drain=20s") {
		t.Fatalf("the upgraded Deployment does not carry the changed value: %s", args)
	}
	ing := api.wait(t, id, 5*time.Minute)
	if s := ing.Data.Attributes.Summary; ing.Data.Attributes.Status != "completed" || s.Total != 100_000 || s.Processed != 100_000 || s.Invalid != 0 {
		t.Fatalf("ingestion %s across the upgrade: %s %+v, want completed with 100000 processed", id, ing.Data.Attributes.Status, s)
	}
}

// TestScannerCronJobPushesWithItsServiceAccount turns the chart's in-cluster
// scanner on and runs it at once from its CronJob: postctl scan kubernetes
// in a pod with no Secret and no API key pushes through the aggregated API
// as its ServiceAccount, and the tenant gets findings of provider
// kubernetes. Its account may create uploads in that one namespace only.
func TestScannerCronJobPushesWithItsServiceAccount(t *testing.T) {
	api := install(t)
	ctx := ctxFor(t, 5*time.Minute)
	if _, err := cluster.Helm(ctx, "upgrade", release, chart(), "-n", systemNS, "--reuse-values",
		"--set", "scanner.enabled=true", "--set", "scanner.tenantNamespace="+api.namespace); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitRollout(ctx, systemNS, release, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	sa := "system:serviceaccount:" + systemNS + ":posture-scanner"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"auth", "can-i", "create", "uploads.data.posture.dev", "-n", api.namespace, "--as", sa}, "yes"},
		{[]string{"auth", "can-i", "create", "uploads.data.posture.dev", "-n", "tenant-other", "--as", sa}, "no"},
		{[]string{"auth", "can-i", "get", "secrets", "-n", api.namespace, "--as", sa}, "no"},
		{[]string{"auth", "can-i", "list", "secrets", "-A", "--as", sa}, "no"},
		{[]string{"auth", "can-i", "list", "findings.data.posture.dev", "-n", api.namespace, "--as", sa}, "no"},
		{[]string{"auth", "can-i", "list", "pods", "-A", "--as", sa}, "yes"},
	} {
		cmd := execCommand("kubectl", append([]string{"--kubeconfig", cluster.Kubeconfig()}, tc.args...)...)
		out, _ := cmd.CombinedOutput()
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("kubectl %s: %s, want %s", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	kubectl(t, nil, "create", "job", "-n", systemNS, "--from=cronjob/posture-scanner", "scan-now")
	var job batchv1.Job
	testenv.EventuallyEvery(t, 3*time.Minute, 500*time.Millisecond, "the scanner Job to succeed", func() (bool, string) {
		if err := kube(t).Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "scan-now"}, &job); err != nil {
			t.Fatal(err)
		}
		if job.Status.Failed > 0 {
			t.Fatalf("scanner Job failed: %+v\n%s", job.Status, kubectl(t, nil, "logs", "-n", systemNS, "job/scan-now"))
		}
		return job.Status.Succeeded > 0, fmt.Sprintf("%+v", job.Status)
	})
	pod := job.Spec.Template.Spec
	if len(pod.Volumes) != 1 || pod.Volumes[0].Secret != nil || len(pod.Containers[0].Env) != 0 || len(pod.Containers[0].EnvFrom) != 0 {
		t.Errorf("the scanner's pod carries more than a scratch volume: volumes %+v, env %+v", pod.Volumes, pod.Containers[0].Env)
	}
	logs := kubectl(t, nil, "logs", "-n", systemNS, "job/scan-now")
	m := regexp.MustCompile(`ingestion\.posture\.dev/(\S+) `).FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("the scanner did not push:\n%s", logs)
	}
	ing := api.wait(t, m[1], 2*time.Minute)
	if s := ing.Data.Attributes.Summary; ing.Data.Attributes.Status != "completed" || s.Total == 0 || s.Invalid != 0 {
		t.Fatalf("the scan's ingestion %s: %s %+v\n%s", m[1], ing.Data.Attributes.Status, s, logs)
	}
	var findings struct {
		Meta struct {
			Pagination struct{ Count int } `json:"pagination"`
		} `json:"meta"`
	}
	if code := api.do(t, "GET", "/api/v1/findings?filter[provider_type]=kubernetes&page[size]=1", "", nil, &findings); code != 200 || findings.Meta.Pagination.Count == 0 {
		t.Fatalf("findings of provider kubernetes: status %d, count %d", code, findings.Meta.Pagination.Count)
	}
	t.Logf("the in-cluster scan pushed %d findings of provider kubernetes", findings.Meta.Pagination.Count)
}

// TestHelmUninstallLeavesNoPods uninstalls the release: no pod and no Job
// of it stays behind, worker Jobs included; the CRDs stay (crds.keep).
func TestHelmUninstallLeavesNoPods(t *testing.T) {
	api := install(t)
	ctx := ctxFor(t, 5*time.Minute)
	cl := kube(t)
	// An MCPServer is the user's object in the user's namespace; it goes
	// the way users remove MCP servers, before the operator does.
	var servers posturev1.MCPServerList
	if err := cl.List(ctx, &servers); err != nil {
		t.Fatal(err)
	}
	for i := range servers.Items {
		if err := cl.Delete(ctx, &servers.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	uninstall(t)
	testenv.EventuallyEvery(t, 2*time.Minute, time.Second, "helm uninstall to leave no pods and no Jobs", func() (bool, string) {
		var pods corev1.PodList
		var jobs batchv1.JobList
		if err := cl.List(ctx, &pods, client.InNamespace(systemNS)); err != nil {
			t.Fatal(err)
		}
		if err := cl.List(ctx, &jobs, client.InNamespace(systemNS)); err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, p := range pods.Items {
			left = append(left, "pod "+p.Name+" ("+string(p.Status.Phase)+")")
		}
		for _, j := range jobs.Items {
			left = append(left, "job "+j.Name)
		}
		var mcpPods corev1.PodList
		if err := cl.List(ctx, &mcpPods, client.InNamespace(api.namespace)); err != nil {
			t.Fatal(err)
		}
		for _, p := range mcpPods.Items {
			left = append(left, "pod "+api.namespace+"/"+p.Name)
		}
		return len(left) == 0, "still there: " + strings.Join(left, ", ")
	})
	if out := kubectl(t, nil, "get", "crd", "ingestions.posture.dev", "-o", "name"); !strings.Contains(out, "ingestions.posture.dev") {
		t.Fatalf("helm uninstall removed the CRDs (crds.keep is on by default): %s", out)
	}
}

// TestSQLiteInstall installs the chart the way a single-replica install on
// SQLite is documented (one replica, in-process executor, the database on a
// PersistentVolumeClaim, bound here to a local PersistentVolume the test
// provides), and ingests a report.
func TestSQLiteInstall(t *testing.T) {
	needCluster(t)
	installed.Lock()
	busy := installed.done
	installed.Unlock()
	if busy {
		t.Fatal("the PostgreSQL install is still there: TestHelmUninstallLeavesNoPods runs first")
	}
	ctx := ctxFor(t, 6*time.Minute)
	cl := kube(t)
	dir := filepath.Join(cluster.State.Dir, "volumes", "sqlite")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pv := fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: posture-sqlite}
spec:
  capacity: {storage: 8Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  local: {path: %q}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [%s]}
`, dir, cluster.State.NodeName)
	if err := cluster.Apply(ctx, []byte(pv)); err != nil {
		t.Fatal(err)
	}
	api := installWith(t, localcluster.Posture{Chart: chart(), Set: []string{
		"store.driver=sqlite", "executor=inprocess", "replicaCount=1", "persistence.enabled=true",
	}}, 1)
	id := api.upload(t, fixture("aws_1500_records.ocsf.json"))
	ing := api.wait(t, id, 3*time.Minute)
	if s := ing.Data.Attributes.Summary; ing.Data.Attributes.Status != "completed" || s.Total != 1500 || s.Processed != 1500 || s.Invalid != 0 {
		t.Fatalf("ingestion %s on SQLite: %s %+v, want completed with 1500 processed", id, ing.Data.Attributes.Status, s)
	}
	var db os.FileInfo
	db, err := os.Stat(filepath.Join(dir, "posture.db"))
	if err != nil {
		t.Fatalf("the SQLite database is not on the PersistentVolume: %v", err)
	}
	t.Logf("posture.db on the volume: %d bytes", db.Size())
	var pvc corev1.PersistentVolumeClaimList
	if err := cl.List(ctx, &pvc, client.InNamespace(systemNS)); err != nil {
		t.Fatal(err)
	}
	if len(pvc.Items) != 1 || pvc.Items[0].Spec.VolumeName != "posture-sqlite" {
		t.Fatalf("claims in %s: %+v, want one bound to posture-sqlite", systemNS, pvc.Items)
	}
	uninstall(t)
}
