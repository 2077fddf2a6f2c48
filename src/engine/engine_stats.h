// EngineStats: a snapshot of one engine's state, for status endpoints and tests.
#pragma once

#include <cstdint>

namespace llmux {

struct EngineStats {
  // Requests by stage. waiting + prefilling + generating are every live entry
  // of the engine's per-request bookkeeping; after all requests end, all are 0.
  int32_t waiting = 0;
  int32_t prefilling = 0;
  int32_t generating = 0;
  int32_t slots_total = 0;     // sequences that can run at once (--parallel)
  int32_t slots_busy = 0;
  int64_t kv_cells_used = 0;      // cells held by running sequences
  int64_t kv_cells_retained = 0;  // cells of completed sequences kept for reuse (tier 0)
  int32_t retained_sequences = 0;
  int64_t kv_cells_total = 0;
  int32_t pending_commands = 0;
  bool admission_paused = false;       // new requests wait while others run (memory pressure)
  int64_t newest_admission_ns = 0;     // steady-clock time the newest running request was admitted; 0 = none
  // Lifetime counters.
  uint64_t requests_completed = 0;
  uint64_t requests_cancelled = 0;
  uint64_t requests_failed = 0;
  uint64_t prompt_tokens = 0;      // prompt tokens decoded
  uint64_t generated_tokens = 0;   // tokens sampled
  uint64_t steps = 0;              // llama_decode calls
  double prompt_ms = 0;            // time in steps that carried prompt tokens
  uint64_t decode_tokens = 0;      // tokens in steps that carried only generated tokens
  double decode_ms = 0;            // time in those steps (decode_tokens / decode_ms = decode rate)
  // Prefix cache.
  bool prefix_cache = false;       // on for this model
  uint64_t cached_tokens = 0;      // prompt tokens reused instead of computed
  uint64_t device_hits = 0;        // requests that adopted a tier-0 prefix
  uint64_t device_tokens = 0;
  uint64_t hot_blocks = 0;         // blocks restored from RAM
  uint64_t ssd_blocks = 0;         // blocks restored from disk
  uint64_t restore_errors = 0;
  uint64_t exported_blocks = 0;
  uint64_t pending_exports = 0;
  double restore_ms = 0;
  double export_ms = 0;
};

}  // namespace llmux
