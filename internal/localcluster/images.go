package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/posture-dev/posture/internal/ociimage"
)

// coreDNSImage runs cluster DNS; its binary comes from hack/node-tools.sh.
const coreDNSImage = "localhost/posture/coredns:1"

// ctr runs containerd's CLI against the cluster's containerd, in its
// k8s.io namespace (the one the CRI plugin uses).
func (c *Cluster) ctr(ctx context.Context, args ...string) (string, error) {
	return runCtr(ctx, filepath.Join(c.State.Tools, "ctr"), c.containerdSock(), args...)
}

// runCtr returns what ctr printed on stdout; its stderr (warnings, such as
// containerd's notice that cgroup v1 is deprecated) only explains a failure.
func runCtr(ctx context.Context, bin, sock string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// importImages builds the pause and CoreDNS images and imports them with the
// configured archives; the node has no registry to pull from.
func (c *Cluster) importImages(ctx context.Context) error {
	dir := c.path("images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pauseBin := filepath.Join(dir, "pause")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", pauseBin, "./hack/cluster/pause")
	build.Dir = c.cfg.Root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the pause program: %v: %s", err, out)
	}
	archives := append([]string(nil), c.cfg.Images...)
	for _, im := range []struct{ ref, bin, path string }{
		{sandboxImage, pauseBin, "/pause"},
		{coreDNSImage, c.tool("coredns"), "/coredns"},
	} {
		data, err := os.ReadFile(im.bin)
		if err != nil {
			return err
		}
		img, err := ociimage.Build(ociimage.Spec{
			Ref:        im.ref,
			Files:      []ociimage.File{{Path: im.path, Mode: 0o755, Data: data}},
			Entrypoint: []string{im.path},
		})
		if err != nil {
			return err
		}
		archive := filepath.Join(dir, filepath.Base(im.path)+".tar")
		if err := ociimage.WriteArchive(archive, im.ref, img); err != nil {
			return err
		}
		archives = append(archives, archive)
	}
	for _, a := range archives {
		if _, err := c.ctr(ctx, "images", "import", "--local", a); err != nil {
			return fmt.Errorf("importing %s: %w", a, err)
		}
	}
	return nil
}

// ImportImage imports one more OCI archive into the running node.
func (c *Cluster) ImportImage(ctx context.Context, archive string) error {
	_, err := c.ctr(ctx, "images", "import", "--local", archive)
	return err
}
