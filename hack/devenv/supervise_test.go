package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func pidOf(t *testing.T, dir, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".pid"))
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
// keeps dying at once is given up on, which ends make dev; one that dies
// while make dev starts ends it at once.
func TestSupervisor(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   string
		arm      bool
		kill     bool // kill -9 the first run
		wantExit bool // reported on exited: make dev ends
	}{
		{"killed after start-up: restarted", "exec sleep 60", true, true, false},
		{"crash loop: given up", "exit 3", true, false, true},
		{"exits while starting: not restarted", "exit 3", false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := newProcesses(dir)
			p.first, p.most = 10*time.Millisecond, 20*time.Millisecond
			if tc.arm {
				p.arm()
			}
			defer p.stopAll()
			if err := p.start(ctx, spec{name: "prog", path: "/bin/sh", args: []string{"-c", tc.script}}); err != nil {
				t.Fatal(err)
			}
			if tc.kill {
				pid := pidOf(t, dir, "prog")
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(10 * time.Second)
				for pidOf(t, dir, "prog") == pid {
					if time.Now().After(deadline) {
						t.Fatal("prog was not restarted within 10s of kill -9")
					}
					time.Sleep(10 * time.Millisecond)
				}
				p.procs[0].mu.Lock()
				restarts := p.procs[0].restarts
				p.procs[0].mu.Unlock()
				if restarts != 1 {
					t.Errorf("restarts = %d, want 1", restarts)
				}
			}
			wait := 5 * time.Second
			if !tc.wantExit {
				wait = 500 * time.Millisecond
			}
			select {
			case name := <-p.exited:
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
