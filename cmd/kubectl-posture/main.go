// Command kubectl-posture is the kubectl plugin `kubectl posture`: it uploads
// reports and reads ingestions, findings and ingestion errors through
// kube-apiserver with the kubeconfig's identity. See docs/cli.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/posture-dev/posture/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.RunKubectl(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Environ())
	stop()
	os.Exit(code)
}
