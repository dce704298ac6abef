package supervise

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/testenv"
)

func pidOf(t *testing.T, g *Group, name string) int {
	t.Helper()
	b, err := os.ReadFile(g.PIDFile(name))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// A program killed after start-up comes back under a new pid; one that
// keeps dying at once is given up on; one that dies while the system starts
// is reported at once.
func TestGroup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   string
		arm      bool
		kill     bool // kill -9 the first run
		wantExit bool // reported on Exited
	}{
		{"killed after start-up: restarted", "exec sleep 60", true, true, false},
		{"crash loop: given up", "exit 3", true, false, true},
		{"exits while starting: not restarted", "exit 3", false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g := New(t.TempDir(), io.Discard, nil)
			g.First, g.Most = 10*time.Millisecond, 20*time.Millisecond
			if tc.arm {
				g.Arm()
			}
			defer g.StopAll()
			if err := g.Start(ctx, Spec{Name: "prog", Path: "/bin/sh", Args: []string{"-c", tc.script}}); err != nil {
				t.Fatal(err)
			}
			if tc.kill {
				pid := pidOf(t, g, "prog")
				if g.PID("prog") != pid {
					t.Errorf("PID = %d, the pid file says %d", g.PID("prog"), pid)
				}
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				testenv.Eventually(t, 10*time.Second, "prog restarted after kill -9", func() (bool, string) {
					return pidOf(t, g, "prog") != pid, "the same pid"
				})
				if n := g.Restarts("prog"); n != 1 {
					t.Errorf("restarts = %d, want 1", n)
				}
				if again := g.PID("prog"); again == pid || again != pidOf(t, g, "prog") {
					t.Errorf("PID = %d after the restart; the killed run was %d, the pid file says %d", again, pid, pidOf(t, g, "prog"))
				}
			}
			wait := 5 * time.Second
			if !tc.wantExit {
				wait = 500 * time.Millisecond
			}
			select {
			case name := <-g.Exited():
				if !tc.wantExit {
					t.Errorf("%s was reported as ended for good", name)
				}
			case <-time.After(wait):
				if tc.wantExit {
					t.Error("the program was never reported as ended for good")
				}
			}
		})
	}
}
