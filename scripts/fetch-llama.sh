#!/usr/bin/env bash
# Puts the pinned llama.cpp source tree at third_party/llama.cpp (git-ignored).
#
# The source comes from the npm package node-llama-cpp@3.22.1, which carries the
# release as a git bundle (llama/gitRelease.bundle). The tarball is kept in
# $LLMUX_CACHE_DIR (default ~/.cache/llmux) so later runs never download again,
# and its sha256 is checked every time it is used.
#
# Idempotent: exits early when the checkout is already at the pinned commit.
set -euo pipefail

PKG="node-llama-cpp@3.22.1"
TARBALL="node-llama-cpp-3.22.1.tgz"
SHA256="a0d9dd80eacd2ab1cfe71aee57ac8a806487fd70b3d2a38fbec637752d9e5c5f"
COMMIT="de3ff815ea7d559ee917f063901b8986f038abc6"

root=$(cd "$(dirname "$0")/.." && pwd)
dest="${1:-$root/third_party/llama.cpp}"
cache="${LLMUX_CACHE_DIR:-$HOME/.cache/llmux}"

if [ -d "$dest/.git" ] && [ "$(git -C "$dest" rev-parse HEAD 2>/dev/null)" = "$COMMIT" ]; then
  exit 0
fi

mkdir -p "$cache"
if [ ! -f "$cache/$TARBALL" ]; then
  echo "fetch-llama: downloading $PKG into $cache"
  (cd "$cache" && npm pack --silent "$PKG" >/dev/null)
fi
echo "$SHA256  $cache/$TARBALL" | sha256sum --check --status || {
  echo "fetch-llama: sha256 mismatch for $cache/$TARBALL; delete it and retry" >&2
  exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$cache/$TARBALL" -C "$work" package/llama/gitRelease.bundle
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
git -c advice.detachedHead=false clone --quiet "$work/package/llama/gitRelease.bundle" "$dest"
git -C "$dest" -c advice.detachedHead=false checkout --quiet "$COMMIT"
echo "fetch-llama: llama.cpp $COMMIT at $dest"
