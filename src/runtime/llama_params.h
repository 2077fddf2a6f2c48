// The llama.cpp parameter structs for a Model and a Context, built in one place.
//
// Internal to the runtime layer: only runtime/*.cc include this header (it
// includes llama.h). Model::Load, Context::Create and PredictFootprint all build
// their parameters here, so a footprint prediction describes exactly the load
// that follows it.
//
// Thread-safety: pure functions; call from any thread.
#pragma once

#include "llama.h"
#include "runtime/context.h"
#include "runtime/model.h"

namespace llmux::runtime {

// load_mode MMAP or NONE (never AUTO), n_gpu_layers, use_extra_bufts (repacking).
llama_model_params MakeModelParams(const ModelLoadOptions& options);

// n_ctx = kv_cells, n_batch = max_batch, n_ubatch = min(max_batch, 512),
// n_seq_max = n_outputs_max = sequences, threads, unified KV, no perf counters.
llama_context_params MakeContextParams(const ContextOptions& options);

}  // namespace llmux::runtime
