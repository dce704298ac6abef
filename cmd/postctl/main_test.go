package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/posture-dev/posture/internal/pushclient/pushtest"
	"github.com/posture-dev/posture/internal/testenv"
)

var (
	binary string
	cfg    *rest.Config
)

// TestMain builds the real binary and starts a control plane for it to scan.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "postctl-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "postctl")
		build := exec.Command("go", "build", "-o", binary, ".")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building postctl:", err)
			return 1
		}
		env, c, err := testenv.Start()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() { _ = env.Stop() }()
		cfg = c
		return m.Run()
	}())
}

func runBinary(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append([]string{"HOME=" + t.TempDir(), "TMPDIR=" + t.TempDir()}, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

func TestBinaryPush(t *testing.T) {
	ca := pushtest.NewCA(t, "private CA")
	caDir := t.TempDir()
	ca.WriteFile(t, caDir, "ca.pem")
	srv := pushtest.NewTLSServer(t, ca, pushtest.Accepted("5f3c1d2e-0a4b-4c6d-8e9f-102132435465", 3))
	report := testenv.Fixture("aws_3_records.ocsf.json")
	code, out, errOut := runBinary(t, []string{"SERVICE_CLOUD_API_KEY=pk_a.b", "SERVICE_CLOUD_API_BASE_URL=" + srv.URL, "REQUESTS_CA_BUNDLE=" + caDir}, "push", report)
	if code != 0 || !strings.Contains(out, "Findings pushed: ingestion job 5f3c1d2e-0a4b-4c6d-8e9f-102132435465") || !strings.Contains(out, report) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if srv.Conns.Load() != 1 || srv.Requests.Load() != 1 {
		t.Errorf("%d connections, %d requests", srv.Conns.Load(), srv.Requests.Load())
	}
	// Without the bundle the private CA is not trusted.
	code, _, errOut = runBinary(t, []string{"SERVICE_CLOUD_API_KEY=pk_a.b", "SERVICE_CLOUD_API_BASE_URL=" + srv.URL}, "push", report)
	if code != 1 || !strings.Contains(errOut, "not trusted") {
		t.Errorf("exit %d\n%s", code, errOut)
	}
}

func TestBinaryScan(t *testing.T) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := "bin-scan"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "root"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kcPath); err != nil {
		t.Fatal(err)
	}

	ca := pushtest.NewCA(t, "private CA")
	caFile := ca.WriteFile(t, t.TempDir(), "ca.pem")
	srv := pushtest.NewTLSServer(t, ca, pushtest.Error(http.StatusUnauthorized, "not_authenticated", "the API key was revoked"))
	out := t.TempDir()
	code, stdout, stderr := runBinary(t, []string{"KUBECONFIG=" + kcPath, "SERVICE_CLOUD_API_KEY=pk_a.b", "SERVICE_CLOUD_API_BASE_URL=" + srv.URL, "CURL_CA_BUNDLE=" + caFile},
		"scan", "kubernetes", "-o", out, "--namespaces", ns, "--push-to-cloud")
	// The push failed with 401; the exit code is still the scan's (3: failing checks).
	if code != 3 || !strings.Contains(stderr, "HTTP 401") || !strings.Contains(stderr, "Scan results saved in "+out) || !strings.Contains(stdout, "core_privileged_containers") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if srv.Conns.Load() != 1 || srv.Requests.Load() != 1 {
		t.Errorf("%d connections, %d requests", srv.Conns.Load(), srv.Requests.Load())
	}
	code, stdout, _ = runBinary(t, nil, "--version")
	if code != 0 || !strings.HasPrefix(stdout, "postctl version ") {
		t.Errorf("--version: exit %d %q", code, stdout)
	}
}
