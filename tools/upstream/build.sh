#!/usr/bin/env bash
# Builds the Go CAP Operator's controller (SAP/cap-operator, the upstream capdeck sits beside) from its
# published source tarball, once, into a cache beside the control planes:
#
#   <cache>/cap-operator/<version>-linux-amd64/controller
#   <cache>/cap-operator/<version>-linux-amd64/crds/   (what its informers need; see crds() below)
#
# The tarball comes from $CAPDECK_CAP_OPERATOR_SRC, else ../shared/peers/cap-operator-v0.35.0.tar.gz
# (relative to the repository). Its dependencies come from the Go module proxy, verified against the
# tarball's go.sum. The cache root is $CAPDECK_ENVTEST_CACHE, else
# ${XDG_DATA_HOME:-~/.local/share}/kubebuilder-envtest, as tools/envtest/build.sh. A binary already
# present is reused. On success the last line on stdout is the controller's path.
#
# With --crds the last line is the crds/ directory instead: the upstream world installs exactly the
# CRDs that controller was built with.
#
# Why from a tarball: the Go module proxy refuses github.com/sap/cap-operator at every version, so its
# source is kept in shared/peers as published (tag v0.35.0, Apache-2.0). Nothing of it is committed here.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
want="controller"
if [[ "${1:-}" == "--crds" ]]; then want="crds"; fi

src="${CAPDECK_CAP_OPERATOR_SRC:-$repo/../shared/peers/cap-operator-v0.35.0.tar.gz}"
if [[ ! -f "$src" ]]; then
  echo "upstream/build.sh: no Go CAP Operator source at $src; set CAPDECK_CAP_OPERATOR_SRC to the cap-operator-vX.Y.Z.tar.gz from shared/peers" >&2
  exit 1
fi
# The version is in the tarball's name (cap-operator-v0.35.0.tar.gz) and is its top directory.
top="$(basename "$src" .tar.gz)"
version="${top#cap-operator-}"
if [[ "$version" == "$top" || -z "$version" ]]; then
  echo "upstream/build.sh: cannot read a version from $src (expected cap-operator-vX.Y.Z.tar.gz)" >&2
  exit 1
fi

os="$(go env GOOS 2>/dev/null || echo linux)"
arch="$(go env GOARCH 2>/dev/null || echo amd64)"
cache="${CAPDECK_ENVTEST_CACHE:-${XDG_DATA_HOME:-$HOME/.local/share}/kubebuilder-envtest}"
out="$cache/cap-operator/$version-$os-$arch"

# The CRDs the controller's informers wait for: its own (crds/ in the tarball), Istio's Gateway,
# VirtualService and DestinationRule (istio.io/api's generated file) and cert-manager's Certificate
# (run it with CERT_MANAGER=cert-manager.io and DNS_MANAGER=kubernetes, so no Gardener CRD is needed).
# The Istio and cert-manager files come from the module versions the tarball's go.mod pins,
# verified against its go.sum.
crds() {
  local dir="$1" src_dir="$2"
  mkdir -p "$dir"
  cp "$src_dir"/crds/*.yaml "$dir/"
  local istio certmanager
  istio="$(cd "$src_dir" && go mod download -json istio.io/api | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  certmanager="$(cd "$src_dir" && go mod download -json github.com/cert-manager/cert-manager | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  cp "$istio/kubernetes/customresourcedefinitions.gen.yaml" "$dir/istio.yaml"
  cp "$certmanager/deploy/crds/cert-manager.io_certificates.yaml" "$dir/cert-manager.io_certificates.yaml"
}

# Built (controller and crds/ move into place together): reuse.
if [[ -x "$out/controller" && -f "$out/crds/istio.yaml" ]]; then
  echo "upstream/build.sh: reusing the Go CAP Operator $version in $out" >&2
  if [[ "$want" == "crds" ]]; then echo "$out/crds"; else echo "$out/controller"; fi
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "upstream/build.sh: no Go toolchain on PATH; install Go >= 1.26 to build the Go CAP Operator" >&2
  exit 1
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
mkdir -p "$out"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$src" -C "$tmp"
if [[ ! -f "$tmp/$top/cmd/controller/main.go" ]]; then
  echo "upstream/build.sh: $src has no $top/cmd/controller/main.go" >&2
  exit 1
fi

start=$(date +%s)
echo "upstream/build.sh: building the Go CAP Operator $version controller (the first build takes about 12 minutes)" >&2
(cd "$tmp/$top" && go build -trimpath -ldflags "-s -w" -o "$tmp/controller" ./cmd/controller)
crds "$tmp/crds" "$tmp/$top"
rm -rf "$out/crds"
mv "$tmp/crds" "$out/crds"
mv "$tmp/controller" "$out/controller"
end=$(date +%s)
echo "upstream/build.sh: built in $((end - start)) s into $out ($(du -sh "$out/controller" | cut -f1))" >&2
if [[ "$want" == "crds" ]]; then echo "$out/crds"; else echo "$out/controller"; fi
