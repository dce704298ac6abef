package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/testenv"
)

// TestSoak is make soak for one minute, run by make test: the same system,
// load, kill and checks, with smaller reports. Its figures mean nothing on
// a machine busy with the other tests, so nothing is asserted of them; the
// checks (every accepted record stored exactly once, every refusal with its
// reason, no tenant seeing another's data, no answer nobody expected) are
// what guard every change.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak runs the whole system for a minute")
	}
	if _, err := testenv.Assets(); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./cmd/manager", "./cmd/mcp-server")
	cmd.Dir = testenv.Root()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build the manager and the MCP server: %v\n%s", err, out)
	}
	var out strings.Builder
	cfg := Config{Load: time.Minute, Seed: uint64(time.Now().UnixNano()), BinDir: bin, Dir: t.TempDir(), Short: true, Out: &out}
	res, err := Run(t.Context(), cfg)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Kills != 1 {
		t.Errorf("the manager was killed %d times, want once", res.Kills)
	}
	for _, p := range res.Problems {
		t.Error(p)
	}
	if t.Failed() {
		if log, err := os.ReadFile(filepath.Join(cfg.Dir, "soak.log")); err == nil {
			t.Logf("the system's log (%s):\n%s", filepath.Join(cfg.Dir, "soak.log"), tail(string(log), 400))
		}
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
