#include "engine/compute_slot.h"

namespace llmux {

ComputeSlot::Turn ComputeSlot::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = next_ticket_++;
  turn_changed_.wait(lock, [&] { return serving_ == ticket; });
  return Turn(this);
}

void ComputeSlot::Release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++serving_;
  }
  turn_changed_.notify_all();
}

uint64_t ComputeSlot::turns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return serving_;
}

int ComputeSlot::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t queued = next_ticket_ - serving_;
  return queued > 0 ? static_cast<int>(queued - 1) : 0;
}

}  // namespace llmux
