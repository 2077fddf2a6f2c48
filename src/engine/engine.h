// Engine: one loaded model, its llama_context and the thread that owns it.
//
// Ownership: the Engine owns the Model, its ChatTemplate and (on its thread)
// the Context. Nothing else ever touches the context: Submit/Cancel post
// commands that the engine thread applies between decode steps. Each step
// decodes one token for every generating sequence plus prompt chunks of
// prefilling ones (see scheduler.h), samples with each request's own
// sampler, and pushes text to each request's TokenStream.
//
// KV cells: the cache is unified (parallel * context_per_sequence cells), so
// every running sequence can always reach its full context. A completed
// sequence's cells are not freed at once but retained, with their tokens, as
// tier 0 of the prefix cache (engine/prefix_cache.h) until the worst-case
// demand of running and admitted sequences needs them. A new request adopts
// the longest prefix it shares with a retained or running sequence, then
// restores further blocks from the shared BlockStore, and prefills only the
// rest. Retaining also keeps running sequences' cells in position order:
// freeing cells below them would change attention's summation order and so
// greedy outputs. Cancelled and failed sequences are freed at once.
//
// Lifecycle: Start() creates the context on the new thread and returns once
// it exists. The destructor finishes every request still queued or running
// (each stream gets a terminal Completion), joins the thread, frees the
// context and then the model. Every per-request entry has one remover
// (Retire), used by completion, cancellation, errors and shutdown alike.
//
// Thread-safety: all public methods are thread-safe. Code outside the pool
// reaches an Engine only through a Lease (pool/lease.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/compute_slot.h"
#include "engine/engine_options.h"
#include "engine/engine_stats.h"
#include "engine/generation.h"
#include "engine/prefix_cache.h"
#include "engine/token_stream.h"
#include "kvcache/block.h"

namespace llmux {

namespace runtime {
class ChatTemplate;
class Batch;
class Context;
class Model;
}  // namespace runtime

class Engine {
 public:
  // Takes ownership of `model`. On failure returns nullptr and sets *error
  // (the model is freed).
  static std::unique_ptr<Engine> Start(std::unique_ptr<runtime::Model> model, const EngineOptions& options,
                                       std::string* error);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request and returns its stream. The stream always finishes:
  // completed, cancelled or failed. A prompt that is empty or does not fit
  // context_per_sequence() fails at once (callers should check first).
  std::shared_ptr<TokenStream> Submit(GenerationRequest request);
  // Cancels a queued or running request: it leaves the engine's bookkeeping
  // and its KV cells are freed before the next step. Unknown ids are ignored.
  void Cancel(uint64_t request_id);
  // Cancels every request; each stream finishes with kCancelled, `reason`
  // and `code`.
  void CancelAll(const std::string& reason, const std::string& code = "request_cancelled");
  // Fails the most recently admitted running request with kError, `message`
  // and `code` (memory enforcement). Nothing happens when none is running.
  void FailNewest(const std::string& message, const std::string& code);
  // While paused, a new request is admitted only when nothing else runs.
  void SetAdmissionPaused(bool paused);
  // Finishes every request (kCancelled), stops the thread and frees the
  // context. Idempotent; the destructor calls it. The model stays loaded
  // until the Engine is destroyed.
  void Shutdown();

  EngineStats Stats() const;
  // What the prefix cache holds for `prompt` (device, hot, SSD blocks),
  // answered by the engine thread between steps; nothing is changed.
  PrefixProbe Probe(Tokens prompt);
  // The model's KV fingerprint: the identity its cached blocks carry.
  const kv::Hash& fingerprint() const { return fingerprint_; }
  const runtime::Model& model() const { return *model_; }
  const runtime::ChatTemplate& chat_template() const { return *chat_template_; }
  int32_t context_per_sequence() const { return options_.context_per_sequence; }
  const EngineOptions& options() const { return options_; }

 private:
  struct Job;
  struct Sequence;
  struct Command;

  Engine(std::unique_ptr<runtime::Model> model, std::unique_ptr<runtime::ChatTemplate> tmpl,
         const EngineOptions& options);

  void Post(Command command);  // queues a command for the engine thread and wakes it

  // --- engine thread ---
  void Run(std::promise<std::string>* started);
  bool ApplyCommands(std::vector<Command>& commands);  // false: stop requested
  void Step();
  void Admit(Job job);
  void OnToken(Sequence& seq, int32_t token);
  void Retire(size_t index, FinishReason reason, std::string message, std::string code = "");
  // Frees retained sequences, oldest first, until at most `max_cells` cells
  // and `max_sequences` sequences remain.
  void ReleaseRetained(int64_t max_cells, size_t max_sequences);
  void FreeSequence(SeqId seq);
  std::vector<PrefixCache::Source> RunningSources() const;
  void FinishWaiting(Job& job, FinishReason reason, const std::string& message, const std::string& code);  // job already out of waiting_
  void CancelEverything(FinishReason reason, const std::string& message, const std::string& code);
  void FailNewestRunning(const std::string& message, const std::string& code);
  void PublishStats();

  const EngineOptions options_;
  std::unique_ptr<runtime::Model> model_;
  std::unique_ptr<runtime::ChatTemplate> chat_template_;

  // Commands from other threads.
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Command> commands_;
  uint64_t next_request_id_ = 1;

  // Engine-thread state. The per-request bookkeeping is waiting_ and running_.
  std::unique_ptr<runtime::Context> context_;
  std::unique_ptr<runtime::Batch> batch_;
  std::deque<Job> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  std::unique_ptr<PrefixCache> cache_;  // tier 0 and access to the block store
  kv::Hash fingerprint_{};
  std::vector<SeqId> free_ids_;  // sequence ids not running and not retained; lowest last
  EngineStats counters_;

  mutable std::mutex stats_mu_;
  EngineStats stats_;

  std::atomic<bool> admission_paused_{false};

  std::thread thread_;
};

}  // namespace llmux
