// Plain value types shared by every layer above runtime/. Nothing here
// includes llama.cpp headers: runtime/ is the only layer that does.
#pragma once

#include <cstdint>
#include <vector>

namespace llmux {

using Token = int32_t;     // a vocabulary id
using Pos = int32_t;       // a position inside one sequence
using SeqId = int32_t;     // a sequence id inside one llama_context

using Tokens = std::vector<Token>;

}  // namespace llmux
