#include "engine/engine_options.h"

#include <algorithm>

namespace llmux {

EngineOptions ResolveEngineOptions(EngineOptions o, int32_t train_context) {
  if (o.context_per_sequence <= 0) {
    o.context_per_sequence =
        train_context > 0 ? std::min<int32_t>(EngineOptions::kDefaultContext, train_context) : EngineOptions::kDefaultContext;
  }
  o.parallel = std::clamp<int32_t>(o.parallel, 1, EngineOptions::kMaxParallel);
  o.batch_size = std::max(o.batch_size, o.parallel);
  o.block_size = std::clamp<int32_t>(o.block_size, 16, std::max<int32_t>(16, o.context_per_sequence));
  return o;
}

runtime::ContextOptions ContextOptionsFor(const EngineOptions& o) {
  runtime::ContextOptions c;
  c.sequences = static_cast<uint32_t>(2 * o.parallel + o.scratch_sequences);
  c.kv_cells = static_cast<uint32_t>(o.parallel) * static_cast<uint32_t>(o.context_per_sequence);
  c.max_batch = static_cast<uint32_t>(o.batch_size);
  c.flash_attention = o.flash_attention;
  c.threads = o.threads;
  c.batch_threads = o.threads;
  return c;
}

}  // namespace llmux
