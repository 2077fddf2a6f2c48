# Adds the pinned llama.cpp tree as a subproject and builds only what llmux links:
# static `llama`, `ggml` (+ ggml-base, ggml-cpu, optional ggml-cuda) and `llama-common`.
# llama.cpp's own tools (llama-server, llama-bench, ...) are built separately by
# bench/build-peer.sh; they are never linked into llmux.

if(NOT EXISTS "${LLAMA_CPP_DIR}/CMakeLists.txt")
  message(FATAL_ERROR "llama.cpp not found at ${LLAMA_CPP_DIR}: run scripts/fetch-llama.sh "
                      "or pass -DLLAMA_CPP_DIR=/path/to/llama.cpp")
endif()

set(BUILD_SHARED_LIBS     OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_COMMON    ON  CACHE BOOL "" FORCE)
set(LLAMA_BUILD_TESTS     OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_TOOLS     OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_EXAMPLES  OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_SERVER    OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_APP       OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_UI        OFF CACHE BOOL "" FORCE)
set(LLAMA_OPENSSL         OFF CACHE BOOL "" FORCE)   # only llama-common's downloader uses it
set(GGML_NATIVE ${LLMUX_NATIVE} CACHE BOOL "" FORCE)
set(GGML_CUDA   ${LLMUX_CUDA}   CACHE BOOL "" FORCE)

# EXCLUDE_FROM_ALL: `cmake --build` builds only the llama.cpp targets llmux depends on.
add_subdirectory("${LLAMA_CPP_DIR}" "${CMAKE_BINARY_DIR}/llama.cpp" EXCLUDE_FROM_ALL)

# nlohmann/json: the copy llama-common uses, so one binary holds one version.
set(LLMUX_NLOHMANN_INCLUDE "${LLAMA_CPP_DIR}/vendor")
