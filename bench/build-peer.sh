#!/usr/bin/env bash
# Builds llama.cpp's own tools from the same pinned tree llmux links:
# llama-bench, llama-batched-bench and llama-server, in build-peer/ (git-ignored).
# They are the peers every llmux benchmark is compared with; never linked into llmux.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src="${LLAMA_CPP_DIR:-$root/third_party/llama.cpp}"
out="${PEER_BUILD:-$root/build-peer}"
[ -f "$src/CMakeLists.txt" ] || "$root/scripts/fetch-llama.sh"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ ! -f "$out/CMakeCache.txt" ]; then
  cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON "${launcher[@]}" ${PEER_CMAKE_FLAGS:-} >/dev/null
fi
cmake --build "$out" -j"$(nproc)" --target llama-bench llama-batched-bench llama-server >/dev/null
echo "$out/bin"
