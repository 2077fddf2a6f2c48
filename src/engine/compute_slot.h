// ComputeSlot: the machine's compute, shared by every engine in the process.
//
// An engine holds the slot for one decode step. Engines that want it queue
// in arrival order (FIFO tickets), so two busy models alternate step by step:
// both make progress and the CPU cores are never oversubscribed by two
// thread teams at once. With one busy engine the slot costs one uncontended
// mutex round trip per step.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace llmux {

class ComputeSlot {
 public:
  // Holding a Turn means holding the slot; it is released when the Turn dies.
  class Turn {
   public:
    explicit Turn(ComputeSlot* slot) : slot_(slot) {}
    Turn(Turn&& other) noexcept : slot_(other.slot_) { other.slot_ = nullptr; }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    ~Turn() {
      if (slot_ != nullptr) slot_->Release();
    }

   private:
    ComputeSlot* slot_;
  };

  // Blocks until it is this caller's turn.
  Turn Acquire();
  // Turns taken so far (for tests and status).
  uint64_t turns() const;
  // Callers waiting for the slot right now.
  int waiting() const;

 private:
  void Release();

  mutable std::mutex mu_;
  std::condition_variable turn_changed_;
  uint64_t next_ticket_ = 0;
  uint64_t serving_ = 0;
};

}  // namespace llmux
