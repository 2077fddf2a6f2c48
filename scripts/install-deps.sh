#!/usr/bin/env bash
# Installs the Debian packages llmux needs to build, test and benchmark, and
# only those that are missing (so a second run does nothing and needs no root).
#
#   scripts/install-deps.sh            build + test packages
#   scripts/install-deps.sh bench      also what `make bench` needs (gnuplot)
set -euo pipefail

pkgs=(build-essential cmake git pkg-config ccache
      libboost-dev libcli11-dev libspdlog-dev libssl-dev libxxhash-dev
      libgtest-dev nodejs npm)
if [ "${1:-}" = "bench" ]; then
  pkgs+=(gnuplot-nox)
fi

missing=()
for p in "${pkgs[@]}"; do
  # A tool that is already on PATH (e.g. a node or cmake not from Debian) counts as present.
  case "$p" in
    nodejs) command -v node >/dev/null 2>&1 && continue ;;
    npm)    command -v npm  >/dev/null 2>&1 && continue ;;
    cmake)  command -v cmake >/dev/null 2>&1 && continue ;;
    git)    command -v git  >/dev/null 2>&1 && continue ;;
  esac
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done

[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
