// TokenStream: the one-way channel that carries a request's output from the
// engine thread to whoever serves the client.
//
// The producer (engine thread) appends text and finishes exactly once. The
// consumer registers a listener and takes output when told. Output that
// arrives while the consumer has not yet taken the previous batch is merged,
// so a slow consumer costs the engine nothing but a string append.
//
// Thread-safety: all methods are thread-safe. The listener runs on the
// producer's thread with no lock held; it should only schedule work (post to
// an executor), never block.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "engine/generation.h"

namespace llmux {

class TokenStream {
 public:
  explicit TokenStream(uint64_t request_id) : request_id_(request_id) {}
  TokenStream(const TokenStream&) = delete;
  TokenStream& operator=(const TokenStream&) = delete;

  uint64_t request_id() const { return request_id_; }

  // --- producer ---
  // Appends text ready for the client (whole UTF-8 characters, stop strings
  // removed). Ignored after Finish().
  void Append(std::string_view text);
  // Ends the stream. Only the first call counts.
  void Finish(Completion completion);

  // --- consumer ---
  struct Output {
    std::string text;                       // text appended since the last Take()
    std::optional<Completion> completion;   // set once the stream has finished
  };
  // Sets the function to call when output is ready. It is called once per
  // Take(): after it fires it fires again only when the consumer has taken the
  // output and more arrives. If output is already waiting it fires at once.
  void SetListener(std::function<void()> listener);
  // Drops the listener (and everything it captured).
  void ClearListener();
  Output Take();
  bool finished() const;

 private:
  // Returns the listener to call (outside the lock) if one is due.
  std::function<void()> DueListenerLocked();

  const uint64_t request_id_;
  mutable std::mutex mu_;
  std::string text_;
  std::optional<Completion> completion_;
  bool finished_ = false;
  bool notified_ = false;  // the listener fired and the consumer has not taken yet
  std::function<void()> listener_;
};

}  // namespace llmux
