// Package localcluster runs a one-node Kubernetes cluster on this machine, as
// root, from binaries built from Go modules (hack/control-plane.sh,
// hack/node-tools.sh) and Debian's runc, CNI plugins and iptables: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, containerd, kubelet,
// kube-proxy and CoreDNS. Everything runs inside one network namespace made
// for the cluster, whose default route leads into a bridge with no ports, so
// nothing leaves it; a veth pair gives the host (and only the host) the node
// IP and, through a route, the Service addresses.
//
// make cluster and the node tests (test/node) use it. The cluster outlives
// the process that started it (its components are daemons recorded in
// <dir>/cluster.json), and Down tears it down from that record alone,
// leaving no process, mount, cgroup, network namespace or interface behind.
package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config says what to start.
type Config struct {
	// Dir holds the cluster's state: certificates, etcd, containerd, the
	// kubelet's root, logs and cluster.json. Created if missing.
	Dir string
	// K8sBin holds kube-apiserver, kubelet, kube-controller-manager,
	// kube-scheduler, kube-proxy and etcd (hack/control-plane.sh).
	K8sBin string
	// Tools holds containerd, ctr, containerd-shim-runc-v2, helm and coredns
	// (hack/node-tools.sh).
	Tools string
	// Root is the repository: the pause program is built from it.
	Root string
	// Images are OCI archives imported into the node before anything runs.
	Images []string
	// Postgres runs a PostgreSQL server on the node, reachable from pods at
	// the node IP: the "external database" of many private clouds.
	Postgres bool
	// Owner is a process whose death makes the cluster stale: a later Start
	// tears such clusters down. 0: the cluster lives until Down (make
	// cluster).
	Owner int
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// State is what Down needs to find everything again; it is written to
// <dir>/cluster.json as soon as each part exists.
type State struct {
	Dir         string         `json:"dir"`
	Slot        int            `json:"slot"`
	NetNS       string         `json:"netns"`
	HostIf      string         `json:"hostInterface"`
	HostIP      string         `json:"hostIP"`
	NodeIP      string         `json:"nodeIP"`
	NodeName    string         `json:"nodeName"`
	ServiceCIDR string         `json:"serviceCIDR"`
	PodCIDR     string         `json:"podCIDR"`
	CgroupRoot  string         `json:"cgroupRoot"`
	Owner       int            `json:"owner,omitempty"`
	PIDs        map[string]int `json:"pids"`
	// Exes holds each component's binary, so Down never signals a process
	// that merely reuses a recorded PID.
	Exes map[string]string `json:"exes"`
	// Tools is the directory of ctr, for Down.
	Tools string `json:"tools"`
	// PostgresDSN is set when the cluster runs PostgreSQL, as pods reach it.
	PostgresDSN string `json:"postgresDSN,omitempty"`
}

// serviceIP is the n-th address of the Service range.
func (s *State) serviceIP(n int) string {
	ip, _, _ := net.ParseCIDR(s.ServiceCIDR)
	ip = ip.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+byte(n)).String()
}

func (s *State) apiServiceIP() string { return s.serviceIP(1) }

// DNSIP is the cluster DNS Service's address.
func (s *State) DNSIP() string { return s.serviceIP(10) }

// Cluster is a started cluster.
type Cluster struct {
	State State
	cfg   Config
	log   io.Writer
}

const (
	stateFile = "cluster.json"
	// slots bounds how many clusters may run at once on one machine (make
	// cluster beside make test, say); each has its own addresses.
	slots    = 16
	nodeName = "posture-node"
	// nsPrefix names the network namespaces and cgroups of our clusters.
	nsPrefix = "posture-node-"
)

func (c *Cluster) path(parts ...string) string {
	return filepath.Join(append([]string{c.State.Dir}, parts...)...)
}

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.log, "localcluster: "+format+"\n", args...)
}

// Kubeconfig is the admin kubeconfig; it works from the host.
func (c *Cluster) Kubeconfig() string { return c.path("admin.kubeconfig") }

// NodeIP is the node's address, reachable from the host and from pods.
func (c *Cluster) NodeIP() string { return c.State.NodeIP }

// PostgresDSN is the DSN pods use to reach the node's PostgreSQL, "" without one.
func (c *Cluster) PostgresDSN() string { return c.State.PostgresDSN }

func (c *Cluster) save() error {
	data, err := json.MarshalIndent(c.State, "", "  ")
	if err != nil {
		return err
	}
	tmp := c.path(stateFile + ".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, c.path(stateFile))
}

// Load reads the record of a cluster started in dir.
func Load(dir string) (*Cluster, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	c := &Cluster{log: io.Discard}
	if err := json.Unmarshal(data, &c.State); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	return c, nil
}

// Start brings a cluster up and returns once the node is Ready and cluster
// DNS answers. On failure it tears down what it started.
func Start(ctx context.Context, cfg Config) (c *Cluster, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("localcluster: a node needs root (network namespaces, mounts, cgroups)")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile)); err == nil {
		return nil, fmt.Errorf("localcluster: %s already holds a cluster; tear it down first (make cluster-down)", dir)
	}
	sweepStale(cfg.Log)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// PostgreSQL runs as its own user and must reach its directory inside.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	c = &Cluster{cfg: cfg, log: cfg.Log, State: State{
		Dir: dir, NodeName: nodeName, Owner: cfg.Owner,
		PIDs: map[string]int{}, Exes: map[string]string{}, Tools: cfg.Tools,
	}}
	defer func() {
		if err != nil {
			c.logf("start failed; tearing down")
			if derr := c.down(true); derr != nil {
				err = fmt.Errorf("%w (and tearing down: %v)", err, derr)
			}
			err = fmt.Errorf("localcluster: %w (logs in %s)", err, c.path("logs"))
		}
	}()
	for _, d := range []string{"logs", "etc"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return c, err
		}
	}
	t0 := time.Now()
	if err := c.setupNetwork(); err != nil {
		return c, fmt.Errorf("network: %w", err)
	}
	if err := c.writePKI(); err != nil {
		return c, fmt.Errorf("certificates: %w", err)
	}
	if cfg.Postgres {
		if err := c.startPostgres(ctx); err != nil {
			return c, fmt.Errorf("postgres: %w", err)
		}
	}
	if err := c.startControlPlane(ctx); err != nil {
		return c, err
	}
	if err := c.startContainerd(ctx); err != nil {
		return c, fmt.Errorf("containerd: %w", err)
	}
	if err := c.importImages(ctx); err != nil {
		return c, fmt.Errorf("images: %w", err)
	}
	if err := c.startNode(ctx); err != nil {
		return c, err
	}
	if err := c.installDNS(ctx); err != nil {
		return c, fmt.Errorf("cluster DNS: %w", err)
	}
	c.logf("node %s Ready with cluster DNS after %s", c.State.NodeName, time.Since(t0).Round(100*time.Millisecond))
	return c, nil
}

// proc is one component to run as a daemon inside the cluster's namespace.
type proc struct {
	name string
	argv []string
	// user runs it as uid:gid ("" for root).
	uid, gid int
}

// spawn starts p inside the network namespace, in a session of its own, so
// it outlives the process that started it; its output goes to logs/<name>.log.
func (c *Cluster) spawn(p proc) error {
	logf, err := os.OpenFile(c.path("logs", p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"--net=" + netnsPath(c.State.NetNS)}
	if p.uid != 0 {
		args = append(args, "--setuid="+strconv.Itoa(p.uid), "--setgid="+strconv.Itoa(p.gid))
	}
	args = append(append(args, "--"), p.argv...)
	cmd := exec.Command("nsenter", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = c.State.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	// nsenter execs the component, so this PID becomes the component's;
	// wait for the exec, so that running() sees the component from now on.
	pid := cmd.Process.Pid
	c.State.PIDs[p.name] = pid
	c.State.Exes[p.name] = p.argv[0]
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() // reap it if it exits while this process lives
	nsenter, _ := exec.LookPath("nsenter")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || exe != nsenter {
			break
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited at once:\n%s", p.name, c.logTail(p.name))
		default:
		}
	}
	return c.save()
}

// running tells whether the recorded component is alive (not a zombie, and
// not another program that reuses its PID).
func (s *State) running(name string) bool {
	pid := s.PIDs[name]
	if pid <= 0 {
		return false
	}
	return isProcess(pid, s.Exes[name])
}

func isProcess(pid int, exe string) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	got, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && (exe == "" || strings.TrimSuffix(got, " (deleted)") == exe)
}

// waitFor polls check until it returns nil, the timeout passes, or a
// component named in watch dies (its log's tail then explains).
func (c *Cluster) waitFor(ctx context.Context, what string, timeout time.Duration, watch []string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		for _, name := range watch {
			if !c.State.running(name) {
				return fmt.Errorf("%s exited while waiting for %s:\n%s", name, what, c.logTail(name))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %v (last: %v)", what, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// logTail is the end of a component's log, for error messages.
func (c *Cluster) logTail(name string) string {
	data, _ := os.ReadFile(c.path("logs", name+".log"))
	if len(data) > 3000 {
		data = data[len(data)-3000:]
	}
	return string(data)
}
