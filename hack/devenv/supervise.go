package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Restart policy of a supervised program once the system is up. A crash is
// something to watch recover, not a reason to stop the control plane: the
// program comes back after a short pause that doubles while it keeps
// crashing at once, and make dev gives up only on a crash loop.
const (
	firstBackoff = time.Second
	maxBackoff   = 8 * time.Second
	// A run this long counts as healthy: the next crash waits firstBackoff.
	healthyRun = 30 * time.Second
	// This many crashes in a row, each within healthyRun of its start, is
	// a crash loop: make dev stops, since restarting would not help.
	crashLoop = 5
)

// processes are the child programs of the dev environment.
type processes struct {
	mu      sync.Mutex
	procs   []*process
	armed   bool
	exited  chan string // a program that ended for good (before arm, or in a crash loop)
	devDir  string
	stopped bool
	// first and most pause before a restart; zero means firstBackoff and
	// maxBackoff (tests shorten them).
	first, most time.Duration
}

// spec says how to run one program and how to tell it serves.
type spec struct {
	name, path string
	args, env  []string
	healthURL  string // answers 200 once the program serves
}

type process struct {
	spec
	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the current run ends
	started  time.Time
	restarts int
}

func newProcesses(devDir string) *processes {
	return &processes{exited: make(chan string, 8), devDir: devDir}
}

// arm turns restarts on. Before it, a program that exits ends make dev: while
// starting, an exit means a wrong flag or a taken port, which a restart would
// only repeat.
func (p *processes) arm() {
	p.mu.Lock()
	p.armed = true
	p.mu.Unlock()
}

func (p *processes) isArmed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.armed
}

func (p *processes) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

func (p *processes) pidFile(name string) string { return filepath.Join(p.devDir, name+".pid") }

// start runs a program and keeps it running until stopAll or ctx ends.
func (p *processes) start(ctx context.Context, s spec) error {
	proc := &process{spec: s}
	if err := p.launch(proc); err != nil {
		return err
	}
	p.mu.Lock()
	p.procs = append(p.procs, proc)
	p.mu.Unlock()
	go p.watch(ctx, proc)
	return nil
}

// launch starts one run of proc and records its pid in .dev/<name>.pid, which
// is how a person (or a test) finds the process to kill.
func (p *processes) launch(proc *process) error {
	cmd := exec.Command(proc.path, proc.args...)
	cmd.Env = proc.env
	// Its own process group: Ctrl-C reaches make dev alone, which stops the
	// programs in order; Pdeathsig ends them should make dev itself die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", proc.name, err)
	}
	proc.mu.Lock()
	proc.cmd, proc.done, proc.started = cmd, make(chan struct{}), time.Now()
	proc.mu.Unlock()
	_ = os.WriteFile(p.pidFile(proc.name), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600)
	go prefixLines(os.Stdout, "["+proc.name+"] ", out)
	return nil
}

// watch waits for each run of proc to end and starts the next one.
func (p *processes) watch(ctx context.Context, proc *process) {
	first, most := cmp.Or(p.first, firstBackoff), cmp.Or(p.most, maxBackoff)
	backoff := first
	quickCrashes := 0
	for {
		proc.mu.Lock()
		cmd, done, started := proc.cmd, proc.done, proc.started
		proc.mu.Unlock()
		err := cmd.Wait()
		close(done)
		if ctx.Err() != nil || p.isStopped() {
			return
		}
		if !p.isArmed() {
			p.exited <- proc.name
			return
		}
		lived := time.Since(started)
		if lived >= healthyRun {
			backoff, quickCrashes = first, 0
		}
		quickCrashes++
		if quickCrashes >= crashLoop {
			step(fmt.Sprintf("%s exited (%s) %d times in a row within %s of starting: giving up", proc.name, exitReason(err), quickCrashes, healthyRun))
			p.exited <- proc.name
			return
		}
		step(fmt.Sprintf("%s exited (%s) after %s; restarting it in %s", proc.name, exitReason(err), lived.Round(100*time.Millisecond), backoff))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, most)
		// Checked and launched under the lock, so stopAll, which sets stopped
		// under it, sees either no new run or the new one.
		p.mu.Lock()
		if ctx.Err() != nil || p.stopped {
			p.mu.Unlock()
			return
		}
		err = p.launch(proc)
		p.mu.Unlock()
		if err != nil {
			step(fmt.Sprintf("%s could not be restarted: %v", proc.name, err))
			p.exited <- proc.name
			return
		}
		proc.mu.Lock()
		proc.restarts++
		n, pid := proc.restarts, proc.cmd.Process.Pid
		proc.mu.Unlock()
		step(fmt.Sprintf("restarted %s (pid %d, restart %d)", proc.name, pid, n))
		if proc.healthURL != "" {
			go announceHealthy(ctx, proc.name, proc.healthURL)
		}
	}
}

// announceHealthy says when a restarted program serves again, so the log
// shows the whole recovery.
func announceHealthy(ctx context.Context, name, url string) {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				step(name + " serves again at " + url)
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	step(name + " did not answer " + url + " within 90s of its restart; see its lines above")
}

func exitReason(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// stopAll sends SIGTERM in reverse start order and waits for each to leave.
func (p *processes) stopAll() {
	p.mu.Lock()
	p.stopped = true
	procs := append([]*process(nil), p.procs...)
	p.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		proc := procs[i]
		proc.mu.Lock()
		cmd, done := proc.cmd, proc.done
		proc.mu.Unlock()
		select {
		case <-done:
		default:
			step("stopping " + proc.name)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		}
		_ = os.Remove(p.pidFile(proc.name))
	}
}

func prefixLines(w io.Writer, prefix string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintln(w, prefix+sc.Text())
	}
}
