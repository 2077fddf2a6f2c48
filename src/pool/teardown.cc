#include "pool/teardown.h"

#include <exception>

#include <spdlog/spdlog.h>

namespace llmux {

void Teardown::Step(const std::string& name, const std::function<void()>& step) {
  try {
    step();
  } catch (const std::exception& e) {
    spdlog::error("{}: step '{}' failed: {}; continuing", what_, name, e.what());
    failures_.push_back(name + ": " + e.what());
  } catch (...) {
    spdlog::error("{}: step '{}' failed; continuing", what_, name);
    failures_.push_back(name + ": unknown error");
  }
}

}  // namespace llmux
