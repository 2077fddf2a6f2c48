// Teardown: runs the steps of taking something apart, in order, so that a
// failing step never stops the ones after it. Each failure is logged with
// what was being torn down and which step failed.
//
// Thread-safety: one Teardown is used by one thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace llmux {

class Teardown {
 public:
  explicit Teardown(std::string what) : what_(std::move(what)) {}

  // Runs `step`; an exception is caught, logged and recorded.
  void Step(const std::string& name, const std::function<void()>& step);
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  std::string what_;
  std::vector<std::string> failures_;
};

}  // namespace llmux
