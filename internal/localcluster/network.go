package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

func netnsPath(name string) string { return "/run/netns/" + name }

// hostIf names the host's end of a slot's veth pair (at most 15 characters).
func hostIf(slot int) string { return fmt.Sprintf("posture%d", slot) }

// setupNetwork makes the cluster's network namespace:
//
//	host  posture<slot> 10.213.<slot>.1/30 ──veth── node0 10.213.<slot>.2/30 (the node IP)
//	      routes to the Service and pod ranges via the node IP, so the host
//	      reaches ClusterIPs and pods
//	netns void0: a bridge with no ports, holding the default route, so
//	      every address but the host's leads nowhere
//
// Pods get a CNI bridge (cni0) inside the namespace. The slot is the first
// whose host interface does not exist yet; creating it claims the slot.
func (c *Cluster) setupNetwork() error {
	s := &c.State
	var err error
	for slot := 0; slot < slots; slot++ {
		if _, statErr := os.Stat("/sys/class/net/" + hostIf(slot)); statErr == nil {
			continue
		}
		ns := fmt.Sprintf("%s%d", nsPrefix, slot)
		if _, statErr := os.Stat(netnsPath(ns)); statErr == nil {
			continue // a cluster being torn down still holds it
		}
		if err = ip("netns", "add", ns); err != nil {
			continue
		}
		s.NetNS = ns
		if err = ip("link", "add", hostIf(slot), "type", "veth", "peer", "name", "node0", "netns", ns); err != nil {
			ip("netns", "delete", ns)
			s.NetNS = ""
			continue
		}
		s.Slot, s.HostIf = slot, hostIf(slot)
		break
	}
	if s.HostIf == "" {
		return fmt.Errorf("no free slot among %d (host interfaces posture0..%d exist; make cluster-down or remove stale ones): %v", slots, slots-1, err)
	}
	s.HostIP = fmt.Sprintf("10.213.%d.1", s.Slot)
	s.NodeIP = fmt.Sprintf("10.213.%d.2", s.Slot)
	s.ServiceCIDR = fmt.Sprintf("10.%d.0.0/16", 96+s.Slot)
	s.PodCIDR = fmt.Sprintf("10.%d.0.0/16", 160+s.Slot)
	s.CgroupRoot = "/" + s.NetNS
	if err := c.save(); err != nil {
		return err
	}
	in := func(args ...string) error { return ip(append([]string{"-n", s.NetNS}, args...)...) }
	steps := [][]string{
		{"addr", "add", s.HostIP + "/30", "dev", s.HostIf},
		{"link", "set", s.HostIf, "up"},
	}
	for _, st := range steps {
		if err := ip(st...); err != nil {
			return err
		}
	}
	nsSteps := [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", s.NodeIP + "/30", "dev", "node0"},
		{"link", "set", "node0", "up"},
		{"link", "add", "void0", "type", "bridge"},
		{"link", "set", "void0", "up"},
		{"route", "add", "default", "dev", "void0", "src", s.NodeIP},
	}
	for _, st := range nsSteps {
		if err := in(st...); err != nil {
			return err
		}
	}
	for _, cidr := range []string{s.ServiceCIDR, s.PodCIDR} {
		if err := ip("route", "add", cidr, "via", s.NodeIP, "dev", s.HostIf); err != nil {
			return err
		}
	}
	// Forwarding inside the namespace only (host0 to the pods' bridge);
	// the host's own setting is left alone. bridge-nf-call-iptables lets
	// kube-proxy's rules see traffic between pods on one bridge.
	return c.nsexec("sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward && echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables")
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// nsexec runs a short command inside the cluster's network namespace.
func (c *Cluster) nsexec(argv ...string) error {
	out, err := exec.Command("nsenter", append([]string{"--net=" + netnsPath(c.State.NetNS), "--"}, argv...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// teardownNetwork removes the host interface (its peer and the host route go
// with it) and the namespace, whose iptables rules, bridges and pod
// interfaces go with it once no process holds it.
func (s *State) teardownNetwork() error {
	var errs []error
	if s.HostIf != "" {
		if _, err := os.Stat("/sys/class/net/" + s.HostIf); err == nil {
			if err := ip("link", "delete", s.HostIf); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if s.NetNS != "" {
		if _, err := os.Stat(netnsPath(s.NetNS)); err == nil {
			if err := ip("netns", "delete", s.NetNS); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
