// GgufInfo: a few facts read from a GGUF file's header without loading the
// model (metadata only; cheap).
#pragma once

#include <cstdint>
#include <string>

namespace llmux::runtime {

struct GgufInfo {
  std::string architecture;     // general.architecture
  int64_t context_length = 0;   // <arch>.context_length (the training context), 0 if absent
};

// False + *error when the file is not a readable GGUF.
bool ReadGgufInfo(const std::string& path, GgufInfo* info, std::string* error);

}  // namespace llmux::runtime
