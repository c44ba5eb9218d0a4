#!/usr/bin/env bash
# Prints the path of sap-btp-service-operator's ServiceBinding CRD, taken from its Go module
# (pinned in go.mod, verified against go.sum here) in the Go module cache. The real-cluster
# credential stories install it (CAPDECK_SERVICEBINDING_CRD; .ci/run sets it).
#
# Why GONOSUMDB: the proxy serves the module, but the checksum database answers 404 for it, so
# its hashes are pinned in go.sum beside this script instead (a changed zip still fails).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! command -v go >/dev/null 2>&1; then
  echo "crd.sh: no Go toolchain on PATH; install Go >= 1.26 or set CAPDECK_SERVICEBINDING_CRD to the CRD file" >&2
  exit 1
fi
module="github.com/SAP/sap-btp-service-operator"
version="$(sed -n 's/^require github.com\/SAP\/sap-btp-service-operator \(v[0-9.]*\)$/\1/p' "$here/go.mod")"
if [[ -z "$version" ]]; then
  echo "crd.sh: cannot read the pinned version from $here/go.mod" >&2
  exit 1
fi
dir="$(cd "$here" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly GONOSUMDB="$module" \
  go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
crd="$dir/config/crd/bases/services.cloud.sap.com_servicebindings.yaml"
if [[ ! -f "$crd" ]]; then
  echo "crd.sh: $module@$version has no $crd" >&2
  exit 1
fi
echo "$crd"
