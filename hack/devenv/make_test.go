package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/testenv"
)

// goBuilds are the go build command lines make would run for target.
func goBuilds(t *testing.T, target string) [][]string {
	t.Helper()
	cmd := exec.Command("make", "-n", target)
	cmd.Dir = testenv.Root()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n %s: %v", target, err)
	}
	var builds [][]string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if i := slices.Index(f, "go"); i >= 0 && i+1 < len(f) && f[i+1] == "build" {
			builds = append(builds, f[i+2:])
		}
	}
	return builds
}

func flags(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "-o" {
			i++
			continue
		}
		if strings.HasPrefix(args[i], "-") {
			out = append(out, args[i])
		}
	}
	return out
}

// TestMakeDevCompilesTheTreeOnce: make dev builds devenv together with the
// binaries it runs, in one go build with make build's flags. A build with
// other flags (devenv without -trimpath, as before) shares no compiled
// package with it, and compiled the whole tree a second time.
func TestMakeDevCompilesTheTreeOnce(t *testing.T) {
	dev := goBuilds(t, "dev")
	if len(dev) != 1 {
		t.Fatalf("make dev runs %d go builds, want one: %q", len(dev), dev)
	}
	for _, pkg := range []string{"./cmd/...", "./hack/devenv"} {
		if !slices.Contains(dev[0], pkg) {
			t.Errorf("make dev's go build %q does not build %s", dev[0], pkg)
		}
	}
	build := goBuilds(t, "build")
	if len(build) != 1 || !slices.Equal(flags(build[0]), flags(dev[0])) {
		t.Errorf("make build runs %q, make dev %q: their flags differ, so neither reuses the other's compiled packages", build, dev)
	}
	reset := goBuilds(t, "dev-reset")
	if len(reset) != 1 || !slices.Equal(flags(reset[0]), flags(dev[0])) {
		t.Errorf("make dev-reset runs %q, make dev %q: their flags differ", reset, dev)
	}
}
