#!/usr/bin/env bash
# Builds the Kubernetes binaries and etcd from Go modules into a per-user cache and
# prints the directory (usable as KUBEBUILDER_ASSETS). No prebuilt binary can be
# downloaded on our machines, so they are compiled from the published modules:
# kube-apiserver, and the node's kubelet, kube-controller-manager, kube-scheduler
# and kube-proxy (hack/cluster), from k8s.io/kubernetes at the version matching
# k8s.io/api in go.mod, in one `go build` so the packages they share compile once;
# etcd from go.etcd.io/etcd/server/v3 at the version Kubernetes pins.
# A second run finds the binaries and does nothing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
api_version=$(cd "$root" && go list -m -f '{{.Version}}' k8s.io/api)   # v0.36.3
k8s_version="v1${api_version#v0}"                                     # v1.36.3
cache="${POSTURE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/posture}/k8s/${k8s_version}"

k8s_cmds=(kube-apiserver kubelet kube-controller-manager kube-scheduler kube-proxy)
complete=1
for bin in "${k8s_cmds[@]}" etcd; do
  [[ -x "$cache/$bin" ]] || complete=0
done
if ((complete)); then
  echo "$cache"
  exit 0
fi

mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "building control plane ${k8s_version} into ${cache} (first time only, 10-20 minutes)" >&2

# kube-apiserver: a throwaway module that requires k8s.io/kubernetes and points every
# staging module (replaced by relative paths in Kubernetes' own go.mod) at its
# published version.
k8s_mod=$(cd "$work" && go mod download -json "k8s.io/kubernetes@${k8s_version}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
mkdir -p "$work/apiserver"
{
  echo "module posture.dev/controlplane"
  echo
  echo "go 1.26"
  echo
  echo "require k8s.io/kubernetes ${k8s_version}"
  echo
  grep -E '^\s+k8s\.io/[a-z0-9-]+ => \./staging/' "$k8s_mod" |
    awk -v v="$api_version" '{print "replace " $1 " => " $1 " " v}'
} >"$work/apiserver/go.mod"
{
  echo "//go:build tools"
  echo
  echo "package controlplane"
  echo
  for c in "${k8s_cmds[@]}"; do echo "import _ \"k8s.io/kubernetes/cmd/$c\""; done
} >"$work/apiserver/tools.go"

etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2}' "$k8s_mod")
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X ${pkg}.gitVersion=${k8s_version} -X ${pkg}.gitMajor=1"
  ldflags+=" -X ${pkg}.gitMinor=$(echo "$k8s_version" | cut -d. -f2)"
  ldflags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
done

(
  cd "$work/apiserver"
  GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
  mkdir -p "$work/out"
  pkgs=()
  for c in "${k8s_cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$work/out/" "${pkgs[@]}"
)

# etcd: a one-line main around etcdmain.Main.
mkdir -p "$work/etcd"
cat >"$work/etcd/go.mod" <<MOD
module posture.dev/etcd

go 1.26

require go.etcd.io/etcd/server/v3 ${etcd_version}
MOD
cat >"$work/etcd/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
(
  cd "$work/etcd"
  GOFLAGS=-mod=mod go mod tidy >/dev/null
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$cache/etcd.tmp" .
)

for c in "${k8s_cmds[@]}"; do mv "$work/out/$c" "$cache/$c"; done
mv "$cache/etcd.tmp" "$cache/etcd"
echo "$cache"
