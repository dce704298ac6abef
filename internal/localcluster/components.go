package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

func (c *Cluster) k8s(bin string) string  { return filepath.Join(c.cfg.K8sBin, bin) }
func (c *Cluster) tool(bin string) string { return filepath.Join(c.State.Tools, bin) }
func (c *Cluster) pki(file string) string { return c.path("pki", file) }
func (c *Cluster) etc(file string) string { return c.path("etc", file) }
func (c *Cluster) apiServer() string      { return "https://" + net.JoinHostPort(c.State.NodeIP, "6443") }
func (c *Cluster) containerdSock() string { return c.path("containerd", "containerd.sock") }
func (c *Cluster) writeEtc(name, body string) error {
	return os.WriteFile(c.etc(name), []byte(body), 0o644)
}

// startControlPlane runs etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, and waits until kube-apiserver is ready.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	if err := c.spawn(proc{name: "etcd", argv: []string{
		c.k8s("etcd"),
		"--data-dir=" + c.path("etcd"),
		"--listen-client-urls=http://127.0.0.1:2379",
		"--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=default=http://127.0.0.1:2380",
		"--unsafe-no-fsync",
		"--log-level=warn",
	}}); err != nil {
		return err
	}
	if err := c.spawn(proc{name: "kube-apiserver", argv: []string{
		c.k8s("kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0",
		"--secure-port=6443",
		"--advertise-address=" + c.State.NodeIP,
		"--service-cluster-ip-range=" + c.State.ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--client-ca-file=" + c.pki("ca.crt"),
		"--tls-cert-file=" + c.pki("apiserver.crt"),
		"--tls-private-key-file=" + c.pki("apiserver.key"),
		"--kubelet-client-certificate=" + c.pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + c.pki("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority=" + c.pki("ca.crt"),
		// The node's name is not in any DNS: reach the kubelet at its IP.
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki("sa.pub"),
		"--service-account-signing-key-file=" + c.pki("sa.key"),
		// The aggregation layer: kube-apiserver proves itself to extension
		// API servers (data.posture.dev) with this client certificate.
		"--requestheader-client-ca-file=" + c.pki("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + c.pki("front-proxy-client.crt"),
		"--proxy-client-key-file=" + c.pki("front-proxy-client.key"),
		"--profiling=false",
	}}); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", 2*time.Minute, []string{"etcd", "kube-apiserver"}, c.apiReady); err != nil {
		return err
	}
	kc := c.path("controller-manager.kubeconfig")
	if err := c.spawn(proc{name: "kube-controller-manager", argv: []string{
		c.k8s("kube-controller-manager"),
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + c.pki("sa.key"),
		"--root-ca-file=" + c.pki("ca.crt"),
		"--cluster-signing-cert-file=" + c.pki("ca.crt"),
		"--cluster-signing-key-file=" + c.pki("ca.key"),
		"--cluster-cidr=" + c.State.PodCIDR,
		"--service-cluster-ip-range=" + c.State.ServiceCIDR,
		"--profiling=false",
	}}); err != nil {
		return err
	}
	kc = c.path("scheduler.kubeconfig")
	return c.spawn(proc{name: "kube-scheduler", argv: []string{
		c.k8s("kube-scheduler"),
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--profiling=false",
	}})
}

// apiReady asks kube-apiserver's /readyz as the admin, from the host.
func (c *Cluster) apiReady(ctx context.Context) error {
	hc, err := c.adminHTTP()
	if err != nil {
		return err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.apiServer()+"/readyz", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s", resp.Status)
	}
	return nil
}

func (c *Cluster) adminHTTP() (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(c.pki("admin.crt"), c.pki("admin.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(c.pki("ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
	}}, nil
}

// sandboxImage is the pause image every pod's sandbox runs, built here.
const sandboxImage = "localhost/posture/pause:1"

// startContainerd writes containerd's configuration, everything under the
// state directory, and starts it.
//
// The settings this machine needs: cgroup v1 with the cgroupfs driver (no
// systemd); restrict_oom_score_adj, because there is no CAP_SYS_RESOURCE
// (runc fails every sandbox without it); pod network namespaces mounted
// under the state directory, so teardown finds them; a local pause image.
func (c *Cluster) startContainerd(ctx context.Context) error {
	root := c.path("containerd")
	for _, d := range []string{root, c.path("cni", "conf"), c.path("runc")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return err
		}
	}
	config := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs", "io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %[3]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[4]q

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = %[5]q
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
        Root = %[6]q
`, filepath.Join(root, "root"), filepath.Join(root, "state"), c.containerdSock(), sandboxImage, c.path("cni", "conf"), c.path("runc"))
	if err := c.writeEtc("containerd.toml", config); err != nil {
		return err
	}
	// One bridge for every pod, addresses from host-local; its state lives
	// under the state directory too.
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "posture",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, c.State.PodCIDR, c.path("cni", "ipam"))
	if err := os.WriteFile(c.path("cni", "conf", "10-posture.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	// The shims must find containerd-shim-runc-v2 and runc on PATH.
	if err := c.spawn(proc{name: "containerd", argv: []string{
		"/usr/bin/env", "PATH=" + c.cfg.Tools + ":/usr/sbin:/usr/bin:/sbin:/bin",
		c.tool("containerd"), "--config", c.etc("containerd.toml"), "--log-level", "warn",
	}}); err != nil {
		return err
	}
	// env execs containerd: record the binary that actually runs.
	c.State.Exes["containerd"] = c.tool("containerd")
	if err := c.save(); err != nil {
		return err
	}
	return c.waitFor(ctx, "containerd", time.Minute, []string{"containerd"}, func(ctx context.Context) error {
		_, err := c.ctr(ctx, "version")
		return err
	})
}

// startNode runs the kubelet and kube-proxy, and waits for the node to
// register.
func (c *Cluster) startNode(ctx context.Context) error {
	for _, d := range []string{"kubelet", "pod-logs"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return err
		}
	}
	// Pods resolve through cluster DNS only; it forwards nothing upstream.
	if err := c.writeEtc("resolv.conf", "nameserver "+c.State.DNSIP()+"\n"); err != nil {
		return err
	}
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[1]q}
authorization: {mode: Webhook}
tlsCertFile: %[2]q
tlsPrivateKeyFile: %[3]q
address: %[4]q
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://%[5]s
# cgroup v1 only on this machine, and no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[6]q
clusterDNS: [%[7]q]
clusterDomain: cluster.local
resolvConf: %[8]q
podLogsDir: %[9]q
failSwapOn: false
serializeImagePulls: false
# A shared machine: evict late, never collect images (there is no registry to pull them again).
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, nodefs.inodesFree: 1%%, imagefs.available: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 110
`, c.pki("ca.crt"), c.pki("kubelet.crt"), c.pki("kubelet.key"), c.State.NodeIP, c.containerdSock(),
		c.State.CgroupRoot, c.State.DNSIP(), c.etc("resolv.conf"), c.path("pod-logs"))
	if err := c.writeEtc("kubelet.yaml", kubelet); err != nil {
		return err
	}
	if err := c.makeCgroupRoot(); err != nil {
		return err
	}
	if err := c.spawn(proc{name: "kubelet", argv: []string{
		c.k8s("kubelet"),
		"--config=" + c.etc("kubelet.yaml"),
		"--kubeconfig=" + c.path("kubelet-client.kubeconfig"),
		"--root-dir=" + c.path("kubelet"),
		"--node-ip=" + c.State.NodeIP,
		"--hostname-override=" + c.State.NodeName,
		"--v=1",
	}}); err != nil {
		return err
	}
	proxy := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
mode: iptables
clusterCIDR: %q
hostnameOverride: %q
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Conntrack limits are the host's, not the namespace's: leave them alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, c.path("kube-proxy.kubeconfig"), c.State.PodCIDR, c.State.NodeName)
	if err := c.writeEtc("kube-proxy.yaml", proxy); err != nil {
		return err
	}
	if err := c.spawn(proc{name: "kube-proxy", argv: []string{c.k8s("kube-proxy"), "--config=" + c.etc("kube-proxy.yaml")}}); err != nil {
		return err
	}
	return nil
}

// components in the order Down stops them: the kubelet first, so it restarts
// nothing; the control plane last.
var components = []string{"kubelet", "kube-proxy", "containerd", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd", "postgres"}

// makeCgroupRoot creates the kubelet's cgroupRoot in every cgroup v1
// hierarchy: the kubelet refuses a root that does not exist, and puts all
// pods below it, which keeps this cluster's cgroups apart from any other's.
func (c *Cluster) makeCgroupRoot() error {
	hier, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	for _, h := range hier {
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil {
			continue // not a hierarchy (the cgroup2 "unified" mount has one too; so be it)
		}
		d := filepath.Join(h, c.State.CgroupRoot)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		// A new cpuset cgroup has no CPUs or memory nodes until given its
		// parent's.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(d, f), err)
				}
			}
		}
	}
	return nil
}
