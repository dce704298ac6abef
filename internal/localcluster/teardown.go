package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Down tears the cluster down and removes its state directory: the kubelet
// first (so it restarts nothing), then every container and its shim, the
// components, the mounts under the state directory, the cgroups under the
// cluster's cgroup root, and the network namespace with its interfaces. It
// keeps going past errors and reports them all; Leftovers says what remains.
func (c *Cluster) Down() error { return c.down(false) }

// down tears down; keepLogs leaves the logs directory (a failed start's
// only explanation) and removes everything else.
func (c *Cluster) down(keepLogs bool) error {
	s := &c.State
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.stop("kubelet", 10*time.Second)
	if s.running("containerd") {
		if err := c.killContainers(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range components {
		s.stop(name, 15*time.Second)
	}
	// Whatever still runs in the cluster's cgroups or network namespace
	// (a container whose shim was killed, a stray shim) goes now.
	killAll(s.processes())
	if err := s.unmountAll(); err != nil {
		errs = append(errs, err)
	}
	if err := s.removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	if err := s.teardownNetwork(); err != nil {
		errs = append(errs, err)
	}
	// containerd's shims keep their sockets in /run/containerd/s whatever
	// the configuration says; with the shims gone the directories are
	// empty, unless another containerd uses them (then rmdir fails, as it
	// should).
	syscall.Rmdir("/run/containerd/s")
	syscall.Rmdir("/run/containerd")
	if left := s.Leftovers(); len(left) > 0 {
		errs = append(errs, fmt.Errorf("left behind: %s", strings.Join(left, "; ")))
	} else if s.Dir != "" {
		if err := removeState(s.Dir, keepLogs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeState(dir string, keepLogs bool) error {
	if !keepLogs {
		return os.RemoveAll(dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() != "logs" {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// Down tears down the cluster recorded in dir; a directory without a record
// is nothing to do.
func Down(dir string) error {
	c, err := Load(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.Down()
}

// killContainers stops every task (pod sandboxes and containers) through
// containerd, so that the shims exit and remove their sockets. A delete can
// fail for a task that went with its sandbox; only tasks still listed
// afterwards are an error (and what remains of them is killed by PID).
func (c *Cluster) killContainers(ctx context.Context) error {
	out, err := c.ctr(ctx, "tasks", "ls", "-q")
	if err != nil {
		return err
	}
	ids := strings.Fields(out)
	for _, id := range ids {
		c.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
	}
	for _, id := range ids {
		c.ctr(ctx, "tasks", "delete", "--force", id)
	}
	if out, err = c.ctr(ctx, "tasks", "ls", "-q"); err != nil {
		return err
	}
	if left := strings.Fields(out); len(left) > 0 {
		return fmt.Errorf("containerd still lists tasks %s after they were killed and deleted", strings.Join(left, ", "))
	}
	return nil
}

// stop signals a recorded component with SIGTERM, then SIGKILL after grace.
func (s *State) stop(name string, grace time.Duration) {
	if !s.running(name) {
		return
	}
	pid := s.PIDs[name]
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for s.running(name) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if s.running(name) {
		syscall.Kill(pid, syscall.SIGKILL)
		for i := 0; i < 100 && s.running(name); i++ {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func killAll(pids []int) {
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for i := 0; i < 100; i++ {
		alive := false
		for _, pid := range pids {
			if isProcess(pid, "") {
				alive = true
			}
		}
		if !alive {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processes lists what belongs to the cluster: anything in its network
// namespace (every component, and the shims containerd starts) or under its
// cgroup root (every container), and shims of its containerd wherever they
// are.
func (s *State) processes() []int {
	var nsIno uint64
	if s.NetNS != "" {
		var st unix.Stat_t
		if unix.Stat(netnsPath(s.NetNS), &st) == nil {
			nsIno = st.Ino
		}
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	mine := ancestors()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || mine[pid] || !isProcess(pid, "") {
			continue
		}
		if nsIno != 0 {
			var st unix.Stat_t
			if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil && st.Ino == nsIno {
				pids = append(pids, pid)
				continue
			}
		}
		if s.CgroupRoot != "" && inCgroup(pid, s.CgroupRoot) {
			pids = append(pids, pid)
			continue
		}
		// A shim of this cluster's containerd names its socket; only shims,
		// never (say) a shell tailing a log under the state directory.
		if s.Dir != "" {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if strings.Contains(string(cmdline), "containerd-shim") && strings.Contains(string(cmdline), s.Dir+"/") {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// ancestors are this process and its parents, which may name the state
// directory on their command lines (make cluster-down) but are not the
// cluster's.
func ancestors() map[int]bool {
	out := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !out[pid]; {
		out[pid] = true
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			break
		}
		i := strings.LastIndexByte(string(stat), ')')
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 {
			break
		}
		pid, _ = strconv.Atoi(fields[1])
	}
	return out
}

func inCgroup(pid int, root string) bool {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && (parts[2] == root || strings.HasPrefix(parts[2], root+"/")) {
			return true
		}
	}
	return false
}

// mounts lists mount points under the state directory and the namespace's
// bind mount, deepest first.
func (s *State) mounts() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if (s.Dir != "" && (mp == s.Dir || strings.HasPrefix(mp, s.Dir+"/"))) || (s.NetNS != "" && mp == netnsPath(s.NetNS)) {
			out = append(out, mp)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// unmountAll detaches every mount under the state directory (overlay
// roots, pod volumes, pod network namespaces), deepest first; /run/netns is
// left to ip netns delete.
func (s *State) unmountAll() error {
	var errs []error
	for pass := 0; pass < 3; pass++ {
		errs = errs[:0]
		for _, mp := range s.mounts() {
			if s.NetNS != "" && mp == netnsPath(s.NetNS) {
				continue
			}
			if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			}
		}
		if len(errs) == 0 {
			break
		}
	}
	return errors.Join(errs...)
}

// cgroupDirs lists the cluster's cgroup directories in every mounted
// hierarchy (the kubelet's cgroupRoot holds every pod's).
func (s *State) cgroupDirs() []string {
	if s.CgroupRoot == "" {
		return nil
	}
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	var out []string
	for _, h := range hier {
		d := filepath.Join(h, s.CgroupRoot)
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// removeCgroups removes the cluster's cgroups, children first (a cgroup
// directory is removed with rmdir, once it holds no process).
func (s *State) removeCgroups() error {
	var errs []error
	for _, root := range s.cgroupDirs() {
		var dirs []string
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
		for _, d := range dirs {
			var err error
			for i := 0; i < 50; i++ {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond) // a killed process may still be leaving
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists what of the cluster still exists on the machine: its
// processes, mounts, cgroups, network namespace and host interface. Empty
// after a clean Down.
func (s *State) Leftovers() []string {
	var left []string
	for _, pid := range s.processes() {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		left = append(left, fmt.Sprintf("process %d (%s)", pid, strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")))
	}
	for _, m := range s.mounts() {
		left = append(left, "mount "+m)
	}
	for _, d := range s.cgroupDirs() {
		left = append(left, "cgroup "+d)
	}
	if s.NetNS != "" {
		if _, err := os.Stat(netnsPath(s.NetNS)); err == nil {
			left = append(left, "network namespace "+s.NetNS)
		}
	}
	if s.HostIf != "" {
		if _, err := os.Stat("/sys/class/net/" + s.HostIf); err == nil {
			left = append(left, "interface "+s.HostIf)
		}
	}
	return left
}

// sweepStale tears down clusters whose owner process died (a test binary
// killed before its cleanup), found by their records in the temporary
// directory.
func sweepStale(log io.Writer) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), nsPrefix+"*", stateFile))
	for _, f := range dirs {
		c, err := Load(filepath.Dir(f))
		if err != nil || c.State.Owner == 0 || isProcess(c.State.Owner, "") {
			continue
		}
		fmt.Fprintf(log, "localcluster: tearing down the stale cluster in %s (owner %d is gone)\n", c.State.Dir, c.State.Owner)
		if err := c.Down(); err != nil {
			fmt.Fprintf(log, "localcluster: %v\n", err)
		}
	}
}

// TempDir makes a state directory that sweepStale recognises.
func TempDir() (string, error) { return os.MkdirTemp("", nsPrefix) }
