#!/usr/bin/env bash
# The operations tools issue 35 checks capdeck's Helm chart and alert rules with, built once from the
# Go module proxy at pinned versions into the cache beside the control planes, each printing its path
# as the last line on stdout:
#
#   build.sh helm                       <cache>/ops/helm-v3.22.0-<os>-<arch>/helm
#   build.sh helm4                      <cache>/ops/helm-v4.3.1-<os>-<arch>/helm (Helm 4 installs with
#                                       server-side apply: the chart is checked with both majors)
#   build.sh promtool                   <cache>/ops/promtool-v0.316.0-<os>-<arch>/promtool
#   build.sh prometheus-operator-crds   the CRD directory of github.com/prometheus-operator/prometheus-operator
#                                       v0.85.0 in the Go module cache (ServiceMonitor, PodMonitor,
#                                       PrometheusRule, ...), for a control plane that must accept them
#
# The cache root is $CAPDECK_ENVTEST_CACHE, else ${XDG_DATA_HOME:-~/.local/share}/kubebuilder-envtest,
# as tools/envtest/build.sh. A binary already present is reused. Nothing of these tools is committed.
#
# Why this way: neither helm.sh/helm/v3, helm.sh/helm/v4 nor github.com/prometheus/prometheus carries `replace` lines,
# so `go install module/cmd@version` builds exactly the dependency set their own go.sum names (as
# tools/peers/build.sh does for k9s). prometheus/prometheus v0.316.0 is the Go module of a Prometheus
# 3 release. The prometheus-operator root module is served at v0.85.0 (newer ones are refused here);
# its example/prometheus-operator-crd/ holds the CRDs its releases ship.
#
# .ci/run calls all four; tests/real_cluster/ops_tools.rs finds them (CAPDECK_HELM, CAPDECK_PROMTOOL,
# CAPDECK_HELM4, CAPDECK_PROMETHEUS_OPERATOR_CRDS, else this cache).
set -euo pipefail

HELM_VERSION="v3.22.0"
HELM4_VERSION="v4.3.1"
PROMETHEUS_MODULE_VERSION="v0.316.0"
PROMETHEUS_OPERATOR_VERSION="v0.85.0"

tool="${1:-}"
cache="${CAPDECK_ENVTEST_CACHE:-${XDG_DATA_HOME:-$HOME/.local/share}/kubebuilder-envtest}"
if ! command -v go >/dev/null 2>&1; then
  echo "ops/build.sh: no Go toolchain on PATH; install Go >= 1.26 to build $tool" >&2
  exit 1
fi
os="$(go env GOOS)"
arch="$(go env GOARCH)"

# `go install PACKAGE@VERSION` with `ldflags` into $out/$name, unless it is there already.
install() {
  local name="$1" version="$2" package="$3" ldflags="$4"
  local out="$cache/ops/$name-$version-$os-$arch"
  if [[ -x "$out/$name" ]]; then
    echo "ops/build.sh: reusing $name $version in $out" >&2
    echo "$out/$name"
    return
  fi
  mkdir -p "$out"
  # Global: the EXIT trap runs after this function has returned.
  tmp="$(mktemp -d "$out/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  local start
  start=$(date +%s)
  echo "ops/build.sh: building $name $version from the Go module proxy (the first build takes minutes)" >&2
  GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags "$ldflags" "$package@$version"
  mv "$tmp/$name" "$out/$name"
  echo "ops/build.sh: built $name in $(( $(date +%s) - start )) s into $out" >&2
  echo "$out/$name"
}

case "$tool" in
  helm)
    install helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm \
      "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
    ;;
  helm4)
    install helm "$HELM4_VERSION" helm.sh/helm/v4/cmd/helm \
      "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM4_VERSION"
    ;;
  promtool)
    install promtool "$PROMETHEUS_MODULE_VERSION" github.com/prometheus/prometheus/cmd/promtool \
      "-s -w -X github.com/prometheus/common/version.Version=module-$PROMETHEUS_MODULE_VERSION"
    ;;
  prometheus-operator-crds)
    dir="$(GOFLAGS=-mod=mod go mod download -json \
      "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" \
      | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    crds="$dir/example/prometheus-operator-crd"
    if [[ -z "$dir" || ! -f "$crds/monitoring.coreos.com_prometheusrules.yaml" ]]; then
      echo "ops/build.sh: the prometheus-operator module $PROMETHEUS_OPERATOR_VERSION has no CRDs at $crds" >&2
      exit 1
    fi
    echo "$crds"
    ;;
  *)
    echo "usage: tools/ops/build.sh helm|helm4|promtool|prometheus-operator-crds   (prints the path)" >&2
    exit 2
    ;;
esac
