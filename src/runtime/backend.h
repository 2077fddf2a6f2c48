// Process-wide llama.cpp initialisation.
#pragma once

namespace llmux::runtime {

// Initialises the ggml/llama backends once per process and routes llama.cpp's
// log output into spdlog (its INFO chatter at debug level, warnings and errors
// at their own levels). Safe to call more than once and from any thread.
void InitBackend();

}  // namespace llmux::runtime
