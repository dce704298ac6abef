// Command pause is the sandbox process of every pod on the local node
// (hack/cluster): it holds the pod's namespaces, reaps the orphans that end
// up under it, and exits on SIGINT or SIGTERM. Kubernetes' own pause is a C
// program; this one is built here from Go so the node needs no registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
