#!/usr/bin/env bash
# Builds what a one-node cluster (hack/cluster) needs beside the Kubernetes
# binaries of hack/control-plane.sh, into a per-user cache, and prints that
# directory:
#   containerd, ctr, containerd-shim-runc-v2  containerd v2 (kubelet 1.36 needs 2.x)
#   helm                                      the real Helm CLI
#   coredns                                   cluster DNS, with only the plugins the cluster uses
# and installs from Debian's packages what the node runs as is: runc, the CNI
# plugins (bridge, host-local, loopback, portmap) and iptables.
# Nothing can be downloaded here but Go modules and Debian packages, so every
# binary is compiled, statically (CGO_ENABLED=0). A second run does nothing.
set -euo pipefail

containerd_version=v2.4.2
helm_version=$(cd "$(dirname "$0")/../test/helm" && go list -m -f '{{.Version}}' helm.sh/helm/v3) # the chart tests' Helm
coredns_version=v1.15.0

cache="${POSTURE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/posture}/node/containerd-${containerd_version}_helm-${helm_version}_coredns-${coredns_version}"

debian_packages() {
  local missing=()
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null 2>&1 || missing+=(iptables)
  ((${#missing[@]})) || return 0
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "hack/node-tools.sh: ${missing[*]} not installed; the one-node cluster needs them (Debian: apt-get install -y ${missing[*]})" >&2
    exit 1
  fi
  echo "==> installing ${missing[*]} (apt-get install -y)" >&2
  export DEBIAN_FRONTEND=noninteractive # CI has no terminal to answer prompts
  if ! apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
    apt-get update >&2
    apt-get install -y --no-install-recommends "${missing[@]}" >&2
  fi
}
debian_packages

if [[ -x "$cache/containerd" && -x "$cache/ctr" && -x "$cache/containerd-shim-runc-v2" && -x "$cache/helm" && -x "$cache/coredns" ]]; then
  echo "$cache"
  exit 0
fi

mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "building containerd ${containerd_version}, helm ${helm_version} and coredns ${coredns_version} into ${cache} (first time only, a few minutes)" >&2

export CGO_ENABLED=0 GOFLAGS=-mod=mod
GOBIN="$work/bin" go install -trimpath -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=${containerd_version}" \
  "github.com/containerd/containerd/v2/cmd/containerd@${containerd_version}" \
  "github.com/containerd/containerd/v2/cmd/ctr@${containerd_version}" \
  "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@${containerd_version}"
GOBIN="$work/bin" go install -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${helm_version}" \
  "helm.sh/helm/v3/cmd/helm@${helm_version}"

# CoreDNS with the plugins of the cluster's Corefile only (its stock build links
# every cloud provider's SDK): directives in CoreDNS's own order.
mkdir -p "$work/coredns"
cat >"$work/coredns/go.mod" <<MOD
module posture.dev/coredns

go 1.26

require github.com/coredns/coredns ${coredns_version}
MOD
cat >"$work/coredns/main.go" <<'GO'
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func init() {
	dnsserver.Directives = []string{"reload", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes", "loop"}
}

func main() { coremain.Run() }
GO
(
  cd "$work/coredns"
  go mod tidy >/dev/null 2>&1
  go build -trimpath -ldflags "-s -w" -o "$work/bin/coredns" .
)

for bin in containerd ctr containerd-shim-runc-v2 helm coredns; do mv "$work/bin/$bin" "$cache/$bin"; done
echo "$cache"
