#include "engine/token_stream.h"

#include <utility>

namespace llmux {

std::function<void()> TokenStream::DueListenerLocked() {
  if (notified_ || !listener_) return nullptr;
  if (text_.empty() && !completion_) return nullptr;
  notified_ = true;
  return listener_;
}

void TokenStream::Append(std::string_view text) {
  if (text.empty()) return;
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    text_.append(text);
    notify = DueListenerLocked();
  }
  if (notify) notify();
}

void TokenStream::Finish(Completion completion) {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = true;
    completion_ = std::move(completion);
    notify = DueListenerLocked();
  }
  if (notify) notify();
}

void TokenStream::SetListener(std::function<void()> listener) {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    listener_ = std::move(listener);
    notified_ = false;
    notify = DueListenerLocked();
  }
  if (notify) notify();
}

void TokenStream::ClearListener() {
  std::function<void()> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = std::move(listener_);
    listener_ = nullptr;
  }
  // `old` (and what it captured) is destroyed here, outside the lock.
}

TokenStream::Output TokenStream::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  Output out;
  out.text = std::move(text_);
  text_.clear();
  out.completion = std::move(completion_);
  completion_.reset();
  notified_ = false;
  return out;
}

bool TokenStream::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

}  // namespace llmux
