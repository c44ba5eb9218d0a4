#!/usr/bin/env bash
# Builds the real control plane capdeck's tests run against — kube-apiserver and kubectl from
# k8s.io/kubernetes, etcd from go.etcd.io/etcd/server/v3 — and its workload plane —
# kube-controller-manager and kube-scheduler from the same k8s.io/kubernetes, kwok from
# sigs.k8s.io/kwok (it plays the kubelets of fake nodes) — from the pinned consumer modules next to
# this script, into a cache laid out like setup-envtest's:
#
#   <cache>/k8s/<k8s version>-linux-amd64/{etcd,kube-apiserver,kubectl,kube-controller-manager,kube-scheduler,kwok}
#
# kwok is built once (<cache>/kwok/<version>-linux-amd64/kwok) and copied beside each version.
#
# The cache root is $CAPDECK_ENVTEST_CACHE, else ${XDG_DATA_HOME:-~/.local/share}/kubebuilder-envtest
# (setup-envtest's own default, so binaries it downloaded are found too). Binaries already present are
# reused. On success the last line on stdout is the assets directory, ready for KUBEBUILDER_ASSETS.
# The argument names the Kubernetes consumer module: `k8s` (1.34, the default) or `k8s-1.37`.
#
# Why consumer modules: k8s.io/kubernetes and etcd's server module carry `replace` lines, so
# `go install pkg@version` refuses them; k8s/go.mod pins every k8s.io staging module instead.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Which Kubernetes: the consumer module directory next to this script (k8s = 1.34, k8s-1.37 = 1.37).
k8s_dir="$here/${1:-k8s}"
if [[ ! -f "$k8s_dir/go.mod" ]]; then
  echo "build.sh: no consumer module at $k8s_dir (usage: build.sh [k8s|k8s-1.37])" >&2
  exit 1
fi
k8s_version="$(sed -n 's/^\tk8s.io\/kubernetes v\(1\.[0-9.]*\).*/\1/p' "$k8s_dir/go.mod")"
etcd_version="$(sed -n 's/^\tgo.etcd.io\/etcd\/server\/v3 v\(3\.[0-9.]*\).*/\1/p' "$here/etcd/go.mod")"
if [[ -z "$k8s_version" || -z "$etcd_version" ]]; then
  echo "build.sh: cannot read the pinned versions from $k8s_dir/go.mod and $here/etcd/go.mod" >&2
  exit 1
fi

os="$(go env GOOS 2>/dev/null || echo linux)"
arch="$(go env GOARCH 2>/dev/null || echo amd64)"
cache="${CAPDECK_ENVTEST_CACHE:-${XDG_DATA_HOME:-$HOME/.local/share}/kubebuilder-envtest}"
assets="$cache/k8s/$k8s_version-$os-$arch"

binaries=(kube-apiserver kubectl etcd kube-controller-manager kube-scheduler kwok)
all_there() { local b; for b in "${binaries[@]}"; do [[ -x "$assets/$b" ]] || return 1; done; }
if all_there; then
  echo "build.sh: reusing ${binaries[*]} in $assets" >&2
  echo "$assets"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "build.sh: no Go toolchain on PATH; install Go >= 1.26 or point KUBEBUILDER_ASSETS at setup-envtest's binaries" >&2
  exit 1
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
mkdir -p "$assets"
tmp="$(mktemp -d "$assets/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

start=$(date +%s)
minor="${k8s_version#1.}"; minor="${minor%%.*}"
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=v$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
echo "build.sh: building kube-apiserver, kubectl, kube-controller-manager and kube-scheduler v$k8s_version (the first build takes several minutes)" >&2
(cd "$k8s_dir" && go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "$ld" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl \
  k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
echo "build.sh: building etcd v$etcd_version" >&2
(cd "$here/etcd" && go build -trimpath \
  -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v$etcd_version" \
  -o "$tmp/etcd" go.etcd.io/etcd/server/v3)

kwok_version="$(sed -n 's/^\tsigs.k8s.io\/kwok v\([0-9.]*\).*/\1/p' "$here/kwok/go.mod")"
kwok_dir="$cache/kwok/v$kwok_version-$os-$arch"
if [[ ! -x "$kwok_dir/kwok" ]]; then
  echo "build.sh: building kwok v$kwok_version" >&2
  mkdir -p "$kwok_dir"
  (cd "$here/kwok" && go build -trimpath -ldflags "-s -w" -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
  mv "$tmp/kwok" "$kwok_dir/kwok"
fi
cp "$kwok_dir/kwok" "$tmp/kwok"

# Move into place only when all built, so a half-built cache is never reused.
for b in "${binaries[@]}"; do mv "$tmp/$b" "$assets/"; done
end=$(date +%s)
echo "build.sh: built in $((end - start)) s into $assets ($(du -sh "$assets" | cut -f1))" >&2
echo "$assets"
