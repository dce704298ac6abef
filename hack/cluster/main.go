// Command cluster runs Posture on a real one-node Kubernetes cluster on this
// machine (make cluster, make cluster-down): "try the Helm install locally".
//
//	go run ./hack/cluster up    # node, images, helm install, demo tenant, .cluster/env
//	go run ./hack/cluster down  # tears it all down, leaving nothing behind
//
// The node (internal/localcluster) runs inside a network namespace of its
// own with no route out; the host reaches the node and the Service
// addresses through a veth pair, so .cluster/env works from the host shell.
// It needs root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/posture-dev/posture/internal/demo"
	"github.com/posture-dev/posture/internal/localcluster"
)

func main() {
	dir := flag.String("dir", ".cluster", "state directory of the cluster; .cluster/env is written into it")
	images := flag.String("images", "dist/images", "directory of the OCI archives make images writes")
	owner := flag.Int("owner", 0, "with up: a process whose death makes the cluster stale, torn down by the next start (the node tests pass theirs); 0: the cluster lives until down")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: go run ./hack/cluster [-dir .cluster] [-images dist/images] up|down")
		flag.PrintDefaults()
	}
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch flag.Arg(0) {
	case "up":
		err = up(ctx, *dir, *images, *owner)
	case "down":
		err = localcluster.Down(*dir)
		if err == nil {
			fmt.Println("==> cluster down; nothing left behind")
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

// buildDir runs one of the hack/ build scripts and returns the directory it
// prints (its last line).
func buildDir(script string) (string, error) {
	cmd := exec.Command(script)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", script, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

func up(ctx context.Context, dir, imagesDir string, owner int) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	step("building what the node runs (hack/control-plane.sh, hack/node-tools.sh; cached after the first time)")
	k8sBin, err := buildDir("hack/control-plane.sh")
	if err != nil {
		return err
	}
	tools, err := buildDir("hack/node-tools.sh")
	if err != nil {
		return err
	}
	archives, err := filepath.Glob(filepath.Join(imagesDir, "*.tar"))
	if err != nil || len(archives) == 0 {
		return fmt.Errorf("no image archives in %s: run make images first", imagesDir)
	}
	step("starting the node in %s", dir)
	c, err := localcluster.Start(ctx, localcluster.Config{
		Dir: dir, K8sBin: k8sBin, Tools: tools, Root: root, Images: archives, Postgres: true, Owner: owner, Log: os.Stdout,
	})
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			step("tearing the cluster down after the failure")
			if err := c.Down(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}()
	// Every pod Posture runs meets the restricted Pod Security Standard;
	// enforcing it here makes any that does not fail to start.
	if err := restrictedNamespaces(ctx, c, "posture-system", "tenant-demo", "tenant-other", "tenant-nosub"); err != nil {
		return err
	}
	step("helm install posture (chart defaults: job executor, PostgreSQL on the node, 2 replicas)")
	t0 := time.Now()
	if err := c.InstallPosture(ctx, localcluster.Posture{Chart: filepath.Join(root, "charts", "posture"), StoreSecret: true}, 2, true); err != nil {
		return err
	}
	step("every pod Ready %s after helm install", time.Since(t0).Round(time.Second))
	env, err := seedDemo(ctx, c)
	if err != nil {
		return err
	}
	if err := demo.WriteEnv(filepath.Join(c.State.Dir, "env"), "Written by make cluster; source it from the host shell.", env); err != nil {
		return err
	}
	ok = true
	fmt.Printf(`
Posture runs on a one-node cluster. From this shell:

  source %[1]s/env
  kubectl get pods -A
  curl -s -H "Authorization: Api-Key $POSTURE_API_KEY" $POSTURE_API_URL/api/v1/tenant
  open $POSTURE_UI_URL

Stop it with: make cluster-down
`, dir)
	return nil
}

// restrictedNamespaces creates the namespaces with the restricted Pod
// Security Standard enforced.
func restrictedNamespaces(ctx context.Context, c *localcluster.Cluster, names ...string) error {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    pod-security.kubernetes.io/enforce: restricted\n    pod-security.kubernetes.io/enforce-version: latest\n", n)
	}
	return c.Apply(ctx, []byte(b.String()))
}
