// Package supervise keeps a local system's programs running: it starts them,
// records each one's pid in a file, prefixes their output with their names,
// restarts one that dies (as a Deployment's pod would be), and stops them in
// reverse order. make dev and make soak run the manager and the MCP server
// under it.
package supervise

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

// Restart policy of a program once the system is up. A crash is something
// to watch recover, not a reason to stop the control plane: the program
// comes back after a short pause that doubles while it keeps crashing at
// once, and the group gives up only on a crash loop.
const (
	FirstBackoff = time.Second
	MaxBackoff   = 8 * time.Second
	// HealthyRun is how long a run must last to count as healthy: the next
	// crash then waits FirstBackoff again.
	HealthyRun = 30 * time.Second
	// CrashLoop is how many crashes in a row, each within HealthyRun of its
	// start, make a crash loop: the program is given up on, since
	// restarting would not help.
	CrashLoop = 5
)

// Group is the programs of one local system.
type Group struct {
	mu      sync.Mutex
	procs   []*process
	armed   bool
	exited  chan string // a program that ended for good (before Arm, or in a crash loop)
	dir     string
	out     io.Writer
	note    func(string)
	stopped bool
	// First and Most are the first and the longest pause before a restart;
	// zero means FirstBackoff and MaxBackoff (tests shorten them).
	First, Most time.Duration
}

// Spec says how to run one program and how to tell it serves.
type Spec struct {
	Name, Path string
	Args, Env  []string
	// HealthURL answers 200 once the program serves; a restart is
	// announced as complete when it does.
	HealthURL string
}

type process struct {
	Spec
	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the current run ends
	started  time.Time
	restarts int
}

// New is a group that writes each program's pid to dir/<name>.pid (how a
// person, or a test, finds the process to kill), copies the programs'
// output to out line by line, each line prefixed with "[name] ", and tells
// note what it does (a program exited, was restarted, serves again).
func New(dir string, out io.Writer, note func(string)) *Group {
	if note == nil {
		note = func(string) {}
	}
	return &Group{exited: make(chan string, 8), dir: dir, out: out, note: note}
}

// Exited names a program that ended for good: one that exited before Arm,
// or one given up on in a crash loop.
func (g *Group) Exited() <-chan string { return g.exited }

// Arm turns restarts on. Before it, a program that exits is reported on
// Exited and not restarted: while a system starts, an exit means a wrong
// flag or a taken port, which a restart would only repeat.
func (g *Group) Arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

func (g *Group) isArmed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.armed
}

func (g *Group) isStopped() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopped
}

// PIDFile is where the pid of the program name is written.
func (g *Group) PIDFile(name string) string { return filepath.Join(g.dir, name+".pid") }

// PID is the pid of the program's current run, 0 if there is no such
// program.
func (g *Group) PID(name string) int {
	p := g.find(name)
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Restarts is how often the program has been restarted.
func (g *Group) Restarts(name string) int {
	p := g.find(name)
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// find is the program of that name, nil if the group has none.
func (g *Group) find(name string) *process {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Start runs a program and keeps it running until StopAll or ctx ends.
func (g *Group) Start(ctx context.Context, s Spec) error {
	proc := &process{Spec: s}
	if err := g.launch(proc); err != nil {
		return err
	}
	g.mu.Lock()
	g.procs = append(g.procs, proc)
	g.mu.Unlock()
	go g.watch(ctx, proc)
	return nil
}

// launch starts one run of proc and records its pid.
func (g *Group) launch(proc *process) error {
	cmd := exec.Command(proc.Path, proc.Args...)
	cmd.Env = proc.Env
	// Its own process group: Ctrl-C reaches the supervising program alone,
	// which stops the programs in order; Pdeathsig ends them should it die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", proc.Name, err)
	}
	proc.mu.Lock()
	proc.cmd, proc.done, proc.started = cmd, make(chan struct{}), time.Now()
	proc.mu.Unlock()
	_ = os.WriteFile(g.PIDFile(proc.Name), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600)
	go prefixLines(g.out, "["+proc.Name+"] ", out)
	return nil
}

// watch waits for each run of proc to end and starts the next one.
func (g *Group) watch(ctx context.Context, proc *process) {
	first, most := cmp.Or(g.First, FirstBackoff), cmp.Or(g.Most, MaxBackoff)
	backoff := first
	quickCrashes := 0
	for {
		proc.mu.Lock()
		cmd, done, started := proc.cmd, proc.done, proc.started
		proc.mu.Unlock()
		err := cmd.Wait()
		close(done)
		if ctx.Err() != nil || g.isStopped() {
			return
		}
		if !g.isArmed() {
			g.exited <- proc.Name
			return
		}
		lived := time.Since(started)
		if lived >= HealthyRun {
			backoff, quickCrashes = first, 0
		}
		quickCrashes++
		if quickCrashes >= CrashLoop {
			g.note(fmt.Sprintf("%s exited (%s) %d times in a row within %s of starting: giving up", proc.Name, exitReason(err), quickCrashes, HealthyRun))
			g.exited <- proc.Name
			return
		}
		g.note(fmt.Sprintf("%s exited (%s) after %s; restarting it in %s", proc.Name, exitReason(err), lived.Round(100*time.Millisecond), backoff))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, most)
		// Checked and launched under the lock, so StopAll, which sets
		// stopped under it, sees either no new run or the new one.
		g.mu.Lock()
		if ctx.Err() != nil || g.stopped {
			g.mu.Unlock()
			return
		}
		err = g.launch(proc)
		g.mu.Unlock()
		if err != nil {
			g.note(fmt.Sprintf("%s could not be restarted: %v", proc.Name, err))
			g.exited <- proc.Name
			return
		}
		proc.mu.Lock()
		proc.restarts++
		n, pid := proc.restarts, proc.cmd.Process.Pid
		proc.mu.Unlock()
		g.note(fmt.Sprintf("restarted %s (pid %d, restart %d)", proc.Name, pid, n))
		if proc.HealthURL != "" {
			go g.announceHealthy(ctx, proc.Name, proc.HealthURL)
		}
	}
}

// announceHealthy says when a restarted program serves again, so the log
// shows the whole recovery.
func (g *Group) announceHealthy(ctx context.Context, name, url string) {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				g.note(name + " serves again at " + url)
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	g.note(name + " did not answer " + url + " within 90s of its restart; see its lines above")
}

func exitReason(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// StopAll sends SIGTERM in reverse start order and waits for each to leave
// (SIGKILL after 15 s).
func (g *Group) StopAll() {
	g.mu.Lock()
	g.stopped = true
	procs := append([]*process(nil), g.procs...)
	g.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		proc := procs[i]
		proc.mu.Lock()
		cmd, done := proc.cmd, proc.done
		proc.mu.Unlock()
		select {
		case <-done:
		default:
			g.note("stopping " + proc.Name)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		}
		_ = os.Remove(g.PIDFile(proc.Name))
	}
}

func prefixLines(w io.Writer, prefix string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintln(w, prefix+sc.Text())
	}
}
