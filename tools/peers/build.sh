#!/usr/bin/env bash
# Builds the programs `capdeck bench peers` measures capdeck against, once, into a cache beside the
# control planes, and prints the binary's path as the last line on stdout:
#
#   build.sh k9s     <cache>/peers/k9s-v0.50.16-<os>-<arch>/k9s      (Go module proxy, pinned version)
#   build.sh kdash   <cache>/peers/kdash-2.1.1-<os>-<arch>/bin/kdash (crates.io, pinned, --locked)
#   build.sh kdash-smoke  the same kdash without its fat-LTO, one-codegen-unit release profile
#                    (opt-level 1): for a smoke run (`bench_peers.py --smoke`), which checks what kdash
#                    shows, never how fast. CI's smoke run leaves the peers out (--console-peers none).
#                    Its own cache directory, so a measured run never uses it.
#
# The Go CAP Operator, the third peer, is built by tools/upstream/build.sh (shared with its stories).
# The cache root is $CAPDECK_ENVTEST_CACHE, else ${XDG_DATA_HOME:-~/.local/share}/kubebuilder-envtest,
# as tools/envtest/build.sh. A binary already present is reused. Nothing of either peer is committed.
#
# Why pinned this way: the Go module proxy serves github.com/derailed/k9s at a named version (only its
# version list and @latest are refused), and `go install module@version` builds exactly the
# dependency set k9s's own go.sum names. `cargo install --locked` builds exactly kdash's Cargo.lock.
set -euo pipefail

K9S_VERSION="v0.50.16"
KDASH_VERSION="2.1.1"

peer="${1:-}"
cache="${CAPDECK_ENVTEST_CACHE:-${XDG_DATA_HOME:-$HOME/.local/share}/kubebuilder-envtest}"
os="$(go env GOOS 2>/dev/null || echo linux)"
arch="$(go env GOARCH 2>/dev/null || echo amd64)"

# With $out and $bin set: print $bin and exit when it is built; else make $out and a scratch
# directory $tmp inside it (removed on exit), and note the start time.
reuse_or_prepare() {
  local name="$1" version="$2"
  if [[ -x "$bin" ]]; then
    echo "peers/build.sh: reusing $name $version in $out" >&2
    echo "$bin"
    exit 0
  fi
  mkdir -p "$out"
  tmp="$(mktemp -d "$out/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  start=$(date +%s)
}

case "$peer" in
  k9s)
    out="$cache/peers/k9s-$K9S_VERSION-$os-$arch"
    bin="$out/k9s"
    reuse_or_prepare k9s "$K9S_VERSION"
    if ! command -v go >/dev/null 2>&1; then
      echo "peers/build.sh: no Go toolchain on PATH; install Go >= 1.24 to build k9s" >&2
      exit 1
    fi
    echo "peers/build.sh: building k9s $K9S_VERSION from the Go module proxy (the first build takes several minutes)" >&2
    # GOTOOLCHAIN=local: build with the Go on this machine; k9s asks for go >= 1.24.
    GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath \
      -ldflags "-s -w -X github.com/derailed/k9s/cmd.version=$K9S_VERSION" \
      "github.com/derailed/k9s@$K9S_VERSION"
    mv "$tmp/k9s" "$bin"
    echo "peers/build.sh: built k9s in $(( $(date +%s) - start )) s into $out" >&2
    echo "$bin"
    ;;
  kdash|kdash-smoke)
    suffix=""
    if [[ "$peer" == kdash-smoke ]]; then
      suffix="-smoke"
      # Config beats the manifest's [profile.release]: cargo's environment overrides.
      export CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_OPT_LEVEL=1
    fi
    out="$cache/peers/kdash-$KDASH_VERSION$suffix-$os-$arch"
    bin="$out/bin/kdash"
    reuse_or_prepare kdash "$KDASH_VERSION$suffix"
    echo "peers/build.sh: building kdash $KDASH_VERSION$suffix from crates.io (the first build takes several minutes)" >&2
    # Its own target directory: never the project's (CARGO_TARGET_DIR may point there).
    CARGO_TARGET_DIR="$tmp/target" cargo install --quiet --locked --version "$KDASH_VERSION" --root "$tmp/root" kdash
    mkdir -p "$out/bin"
    mv "$tmp/root/bin/kdash" "$bin"
    echo "peers/build.sh: built kdash in $(( $(date +%s) - start )) s into $out" >&2
    echo "$bin"
    ;;
  *)
    echo "usage: tools/peers/build.sh k9s|kdash|kdash-smoke   (prints the built binary's path; the Go CAP Operator: tools/upstream/build.sh)" >&2
    exit 2
    ;;
esac
