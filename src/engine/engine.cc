#include "engine/engine.h"

#include <algorithm>
#include <climits>
#include <chrono>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>

#include "engine/scheduler.h"
#include "runtime/model_fingerprint.h"
#include "engine/stop_matcher.h"
#include "runtime/batch.h"
#include "runtime/chat_template.h"
#include "runtime/compute_threads.h"
#include "runtime/context.h"
#include "runtime/model.h"
#include "runtime/sampler.h"

namespace llmux {
namespace {

using Clock = std::chrono::steady_clock;

double Millis(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace

struct Engine::Job {
  uint64_t id = 0;
  GenerationRequest request;
  std::shared_ptr<TokenStream> stream;
  Clock::time_point submitted;
};

// A request that holds a sequence slot. Engine thread only.
struct Engine::Sequence {
  Job job;
  SeqId seq = -1;
  std::unique_ptr<runtime::Sampler> sampler;
  StopMatcher stop;
  int32_t prompt_done = 0;   // prompt tokens already decoded (or reused from the cache)
  Pos n_past = 0;            // tokens in this sequence's KV cells
  Tokens kv_tokens;          // the tokens those cells hold, by position
  int32_t cached = 0;        // prompt tokens reused from the prefix cache
  bool generating = false;   // the prompt is done and the first token sampled
  Token next_token = 0;      // the sampled token to decode next
  int32_t generated = 0;     // tokens sampled
  int32_t batch_index = -1;  // where this step's logits are, or -1
  bool done = false;         // finished this step; retired after it
  FinishReason reason = FinishReason::kStop;
  std::string message;
  std::string code;
  Clock::time_point admitted;
  Clock::time_point first_token;

  explicit Sequence(Job j) : job(std::move(j)), stop(job.request.stop) {}
  int32_t prompt_size() const { return static_cast<int32_t>(job.request.prompt.size()); }
};

struct Engine::Command {
  enum class Kind { kSubmit, kCancel, kCancelAll, kFailNewest, kProbe, kWake, kStop };
  Kind kind = Kind::kStop;
  Job job;              // kSubmit; kProbe: job.request.prompt
  uint64_t id = 0;      // kCancel
  std::string reason;   // kCancelAll, kFailNewest
  std::string code;     // kCancelAll, kFailNewest
  std::shared_ptr<std::promise<PrefixProbe>> probe;  // kProbe
};

namespace {
constexpr size_t kExportBlocksPerStep = 2;  // copy-out work beside running streams, per step

// What besides the GGUF decides the bytes of a block (part of the model fingerprint).
std::string KvFormat(const EngineOptions& o, const runtime::Context& ctx) {
  return "llama.cpp seq-state; unified; k=" + ctx.k_type_name() + " v=" + ctx.v_type_name() +
         "; fa=" + runtime::FlashAttentionName(o.flash_attention);
}
}  // namespace

std::unique_ptr<Engine> Engine::Start(std::unique_ptr<runtime::Model> model, const EngineOptions& options,
                                      std::string* error) {
  auto tmpl = runtime::ChatTemplate::Create(*model, error);
  if (!tmpl) return nullptr;
  const EngineOptions resolved = ResolveEngineOptions(options, model->train_context_length());
  std::unique_ptr<Engine> engine(new Engine(std::move(model), std::move(tmpl), resolved));
  std::promise<std::string> started;
  std::future<std::string> result = started.get_future();
  engine->thread_ = std::thread([e = engine.get(), &started] { e->Run(&started); });
  std::string startup_error = result.get();
  if (!startup_error.empty()) {
    engine->thread_.join();
    *error = std::move(startup_error);
    return nullptr;
  }
  return engine;
}

Engine::Engine(std::unique_ptr<runtime::Model> model, std::unique_ptr<runtime::ChatTemplate> tmpl,
               const EngineOptions& options)
    : options_(options), model_(std::move(model)), chat_template_(std::move(tmpl)) {
  // Ids [0, 2*parallel) serve requests (running or retained); the scratch ids follow.
  for (int32_t s = 2 * options_.parallel - 1; s >= 0; --s) free_ids_.push_back(s);
}

Engine::~Engine() { Shutdown(); }

void Engine::Shutdown() {
  if (thread_.joinable()) {
    Command stop;
    stop.kind = Command::Kind::kStop;
    Post(std::move(stop));
    thread_.join();
  }
  // Requests submitted after the thread stopped still get a terminal event.
  std::vector<Command> late;
  {
    std::lock_guard<std::mutex> lock(mu_);
    late.swap(commands_);
  }
  for (Command& c : late) {
    if (c.kind == Command::Kind::kSubmit) {
      FinishWaiting(c.job, FinishReason::kCancelled, "the model was unloaded", "model_unloaded");
    }
  }
}

std::shared_ptr<TokenStream> Engine::Submit(GenerationRequest request) {
  Job job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job.id = next_request_id_++;
  }
  job.stream = std::make_shared<TokenStream>(job.id);
  std::shared_ptr<TokenStream> stream = job.stream;
  const auto n = static_cast<int64_t>(request.prompt.size());
  if (n == 0 || n >= options_.context_per_sequence) {
    Completion failed;
    failed.reason = FinishReason::kError;
    failed.error = n == 0 ? "the prompt is empty" : "the prompt does not fit the context";
    stream->Finish(std::move(failed));
    return stream;
  }
  job.request = std::move(request);
  job.submitted = Clock::now();
  Command submit;
  submit.kind = Command::Kind::kSubmit;
  submit.job = std::move(job);
  Post(std::move(submit));
  return stream;
}

void Engine::Cancel(uint64_t request_id) {
  Command cancel;
  cancel.kind = Command::Kind::kCancel;
  cancel.id = request_id;
  Post(std::move(cancel));
}

void Engine::CancelAll(const std::string& reason, const std::string& code) {
  Command cancel;
  cancel.kind = Command::Kind::kCancelAll;
  cancel.reason = reason;
  cancel.code = code;
  Post(std::move(cancel));
}

void Engine::FailNewest(const std::string& message, const std::string& code) {
  Command fail;
  fail.kind = Command::Kind::kFailNewest;
  fail.reason = message;
  fail.code = code;
  Post(std::move(fail));
}

void Engine::SetAdmissionPaused(bool paused) {
  admission_paused_.store(paused);
  Command wake;
  wake.kind = Command::Kind::kWake;  // re-plan now rather than at the next command
  Post(std::move(wake));
}

void Engine::Post(Command command) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back(std::move(command));
  }
  wake_.notify_one();
}

PrefixProbe Engine::Probe(Tokens prompt) {
  Command probe;
  probe.kind = Command::Kind::kProbe;
  probe.job.request.prompt = std::move(prompt);
  probe.probe = std::make_shared<std::promise<PrefixProbe>>();
  std::future<PrefixProbe> result = probe.probe->get_future();
  Post(std::move(probe));
  return result.get();
}

EngineStats Engine::Stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

// ---------------------------------------------------------------------------
// Engine thread.

void Engine::Run(std::promise<std::string>* started) {
  const runtime::ContextOptions copts = ContextOptionsFor(options_);
  std::string error;
  context_ = runtime::Context::Create(*model_, copts, &error);
  if (!context_) {
    started->set_value(error);
    return;
  }
  batch_ = std::make_unique<runtime::Batch>(options_.batch_size);
  const bool sliceable = model_->KvIsSliceable();
  if (options_.prefix_cache && !sliceable) {
    spdlog::info("prefix cache off for '{}': its {} KV cannot be cut into position ranges (sliding-window, "
                 "recurrent or hybrid attention)", model_->path(), model_->architecture());
  }
  const bool cache_on = options_.prefix_cache && sliceable;
  if (cache_on && options_.block_store && !runtime::ModelFingerprint(model_->path(), KvFormat(options_, *context_), &fingerprint_, &error)) {
    started->set_value(error);
    return;
  }
  cache_ = std::make_unique<PrefixCache>(*context_, cache_on, options_.block_store.get(), fingerprint_,
                                         options_.block_size, model_->layer_count(),
                                         /*scratch=*/2 * options_.parallel);
  counters_.prefix_cache = cache_on;
  counters_.slots_total = options_.parallel;
  counters_.kv_cells_total = context_->kv_cells();
  PublishStats();
  started->set_value("");  // `started` must not be touched after this

  std::vector<Command> commands;
  bool keep_running = true;
  while (keep_running) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return !commands_.empty() || !waiting_.empty() || !running_.empty(); });
      commands.swap(commands_);
    }
    keep_running = ApplyCommands(commands);
    commands.clear();
    if (keep_running && (!waiting_.empty() || !running_.empty())) Step();
    if (waiting_.empty() && running_.empty()) {
      cache_->ExportSome(0);  // idle: copy out every pending block now
      // Without reuse, retained cells only serve to keep running sequences'
      // cells in order; idle, nothing runs: free them, so the next request
      // lands where a fresh server would put it (history-independent output).
      if (!counters_.prefix_cache) ReleaseRetained(0, 0);
      runtime::ReleaseComputeThreads();  // an idle team would slow the engines that work
    }
    PublishStats();
  }
  CancelEverything(FinishReason::kCancelled, "the model was unloaded", "model_unloaded");
  ReleaseRetained(0, 0);  // exports every unexported block first
  PublishStats();
  batch_.reset();
  context_.reset();  // the context dies on the thread that owned it
}

bool Engine::ApplyCommands(std::vector<Command>& commands) {
  bool keep_running = true;
  for (Command& c : commands) {
    switch (c.kind) {
      case Command::Kind::kSubmit:
        waiting_.push_back(std::move(c.job));
        break;
      case Command::Kind::kCancel: {
        auto w = std::find_if(waiting_.begin(), waiting_.end(), [&](const Job& j) { return j.id == c.id; });
        if (w != waiting_.end()) {
          Job job = std::move(*w);
          waiting_.erase(w);
          FinishWaiting(job, FinishReason::kCancelled, "the request was cancelled", "request_cancelled");
          break;
        }
        for (size_t i = 0; i < running_.size(); ++i) {
          if (running_[i]->job.id == c.id) {
            Retire(i, FinishReason::kCancelled, "the request was cancelled", "request_cancelled");
            break;
          }
        }
        break;
      }
      case Command::Kind::kCancelAll:
        CancelEverything(FinishReason::kCancelled, c.reason, c.code);
        break;
      case Command::Kind::kFailNewest:
        FailNewestRunning(c.reason, c.code);
        break;
      case Command::Kind::kProbe: {
        const std::vector<PrefixCache::Source> sources = RunningSources();
        c.probe->set_value(cache_->Probe(c.job.request.prompt, sources));
        break;
      }
      case Command::Kind::kWake:
        break;
      case Command::Kind::kStop:
        keep_running = false;
        break;
    }
  }
  return keep_running;
}

void Engine::Admit(Job job) {
  // Many completions in one step can leave every spare id with a retained
  // sequence: give up the oldest.
  if (free_ids_.empty()) {
    const int32_t retained = cache_->stats().retained_sequences;
    ReleaseRetained(INT64_MAX, static_cast<size_t>(std::max(retained - 1, 0)));
  }
  auto seq = std::make_unique<Sequence>(std::move(job));
  seq->seq = free_ids_.back();
  free_ids_.pop_back();
  seq->sampler = runtime::Sampler::Create(*model_, seq->job.request.sampling);
  seq->sampler->Observe(seq->job.request.prompt);
  seq->admitted = Clock::now();
  // Tier 0 first: adopt the cells of the longest shared prefix before any
  // retained sequence is released to make room.
  const std::vector<PrefixCache::Source> sources = RunningSources();
  const int32_t adopted = cache_->Adopt(seq->seq, seq->job.request.prompt, sources);
  seq->n_past = seq->prompt_done = seq->cached = adopted;
  running_.push_back(std::move(seq));
}

std::vector<PrefixCache::Source> Engine::RunningSources() const {
  std::vector<PrefixCache::Source> sources;
  sources.reserve(running_.size());
  for (const auto& s : running_) sources.push_back({s->seq, &s->kv_tokens});
  return sources;
}

void Engine::Step() {
  // 1. Admission, first come first served, into free slots. Under memory
  //    pressure a new request waits unless nothing runs here at all.
  int32_t free = options_.parallel - static_cast<int32_t>(running_.size());
  if (admission_paused_.load() && !running_.empty()) free = 0;
  const size_t first_new = running_.size();
  for (int32_t a = 0; a < free && !waiting_.empty(); ++a) {
    Admit(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  // 2. Every running sequence may grow to its full context: keep only the
  //    retained cells (and sequence ids) this worst case leaves free.
  const int64_t busy = static_cast<int64_t>(running_.size());
  ReleaseRetained((options_.parallel - busy) * options_.context_per_sequence,
                  static_cast<size_t>(2 * options_.parallel - busy));
  // 3. New sequences restore further blocks from the hot/SSD tiers.
  for (size_t i = first_new; i < running_.size(); ++i) {
    Sequence& s = *running_[i];
    const PrefixReuse reuse = cache_->Restore(s.seq, s.job.request.prompt, s.n_past);
    s.n_past = s.prompt_done = s.cached = reuse.tokens;
    s.kv_tokens.assign(s.job.request.prompt.begin(), s.job.request.prompt.begin() + reuse.tokens);
    counters_.cached_tokens += static_cast<uint64_t>(reuse.tokens);
  }

  SchedulerInput in;
  in.batch_capacity = options_.batch_size;
  in.running.reserve(running_.size());
  for (const auto& s : running_) {
    in.running.push_back({s->job.id, s->generating, s->prompt_size() - s->prompt_done});
  }
  const StepPlan plan = PlanStep(in);

  batch_->Clear();
  std::vector<Sequence*> in_batch;
  for (size_t i : plan.decode) {
    Sequence& s = *running_[i];
    s.batch_index = batch_->Add(s.next_token, s.n_past, s.seq, /*want_logits=*/true);
    s.kv_tokens.push_back(s.next_token);
    ++s.n_past;
    in_batch.push_back(&s);
  }
  int32_t prompt_tokens = 0;
  for (const StepPlan::Prefill& p : plan.prefill) {
    Sequence& s = *running_[p.index];
    for (int32_t k = 0; k < p.tokens; ++k) {
      const bool last = s.prompt_done + 1 == s.prompt_size();
      const Token token = s.job.request.prompt[static_cast<size_t>(s.prompt_done)];
      const int32_t idx = batch_->Add(token, s.n_past, s.seq, last);
      s.kv_tokens.push_back(token);
      if (last) s.batch_index = idx;
      ++s.prompt_done;
      ++s.n_past;
    }
    prompt_tokens += p.tokens;
    in_batch.push_back(&s);
  }
  if (batch_->size() == 0) return;

  std::optional<ComputeSlot::Turn> turn;
  if (options_.compute_slot) turn.emplace(options_.compute_slot->Acquire());
  const Clock::time_point t0 = Clock::now();
  const runtime::DecodeStatus status = context_->Decode(*batch_);
  const double ms = Millis(t0, Clock::now());
  // Another engine waits for the CPU: hand it over without leaving a second
  // thread team alive beside it (see runtime/compute_threads.h).
  if (options_.compute_slot && options_.compute_slot->waiting() > 0) runtime::ReleaseComputeThreads();
  turn.reset();
  ++counters_.steps;
  if (status != runtime::DecodeStatus::kOk) {
    const char* what = status == runtime::DecodeStatus::kNoKvSpace ? "the KV cache is full" : "llama_decode failed";
    spdlog::error("engine: decode of {} tokens failed: {}", batch_->size(), what);
    for (Sequence* s : in_batch) {
      s->done = true;
      s->reason = FinishReason::kError;
      s->message = std::string("inference failed: ") + what;
      s->code = "inference_failed";
    }
  } else {
    counters_.prompt_tokens += static_cast<uint64_t>(prompt_tokens);
    if (prompt_tokens > 0) {
      counters_.prompt_ms += ms;
    } else {
      counters_.decode_ms += ms;
      counters_.decode_tokens += static_cast<uint64_t>(batch_->size());
    }
    for (Sequence* s : in_batch) {
      if (s->batch_index < 0) continue;
      const Token token = s->sampler->Sample(*context_, s->batch_index);
      s->batch_index = -1;
      OnToken(*s, token);
    }
  }
  for (size_t i = running_.size(); i-- > 0;) {
    if (running_[i]->done) Retire(i, running_[i]->reason, running_[i]->message, running_[i]->code);
  }
  // 4. Copy out a few blocks of completed sequences, bounded so running
  //    streams are barely held up (all of them once the engine is idle).
  cache_->ExportSome(kExportBlocksPerStep);
}

void Engine::OnToken(Sequence& s, Token token) {
  ++counters_.generated_tokens;
  ++s.generated;
  if (!s.generating) {
    s.generating = true;
    s.first_token = Clock::now();
  }
  auto finish = [&](FinishReason reason) {
    s.done = true;
    s.reason = reason;
    s.job.stream->Append(s.stop.Flush());
  };
  const GenerationRequest& r = s.job.request;
  if (!r.ignore_eos && model_->IsEndOfGeneration(token)) return finish(FinishReason::kStop);
  s.job.stream->Append(s.stop.Push(model_->TokenBytes(token)));
  if (s.stop.stopped()) return finish(FinishReason::kStop);
  if (r.max_tokens >= 0 && s.generated >= r.max_tokens) return finish(FinishReason::kLength);
  if (s.n_past >= options_.context_per_sequence) return finish(FinishReason::kLength);
  s.next_token = token;
}

void Engine::Retire(size_t index, FinishReason reason, std::string message, std::string code) {
  std::unique_ptr<Sequence> s = std::move(running_[index]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(index));
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) {
    cache_->Retain(s->seq, std::move(s->kv_tokens));  // tier 0: kept for reuse
  } else {
    FreeSequence(s->seq);  // a cancelled or failed request leaves nothing behind
  }

  const Clock::time_point now = Clock::now();
  Completion c;
  c.reason = reason;
  c.error = std::move(message);
  c.error_code = std::move(code);
  c.usage.prompt_tokens = s->prompt_size();
  c.usage.completion_tokens = s->generated;
  c.usage.cached_tokens = s->cached;
  c.timings.queued_ms = Millis(s->job.submitted, s->admitted);
  if (s->generating) {
    c.timings.prompt_ms = Millis(s->admitted, s->first_token);
    c.timings.generation_ms = Millis(s->first_token, now);
  } else {
    c.timings.prompt_ms = Millis(s->admitted, now);
  }
  switch (reason) {
    case FinishReason::kStop:
    case FinishReason::kLength: ++counters_.requests_completed; break;
    case FinishReason::kCancelled: ++counters_.requests_cancelled; break;
    case FinishReason::kError: ++counters_.requests_failed; break;
  }
  // Stats first: a client that has seen its request end must see it counted.
  PublishStats();
  s->job.stream->Finish(std::move(c));
}

void Engine::FreeSequence(SeqId seq) {
  context_->ClearSequence(seq);
  free_ids_.push_back(seq);
  std::sort(free_ids_.rbegin(), free_ids_.rend());  // lowest id is reused first
}

void Engine::ReleaseRetained(int64_t max_cells, size_t max_sequences) {
  for (SeqId seq : cache_->Release(max_cells, max_sequences)) {
    free_ids_.push_back(seq);  // Release has cleared the cells
  }
  std::sort(free_ids_.rbegin(), free_ids_.rend());
}

void Engine::FinishWaiting(Job& job, FinishReason reason, const std::string& message, const std::string& code) {
  Completion c;
  c.reason = reason;
  c.error = message;
  c.error_code = code;
  c.usage.prompt_tokens = static_cast<int32_t>(job.request.prompt.size());
  c.timings.queued_ms = Millis(job.submitted, Clock::now());
  if (reason == FinishReason::kCancelled) ++counters_.requests_cancelled;
  if (reason == FinishReason::kError) ++counters_.requests_failed;
  PublishStats();  // `job` has already left waiting_
  job.stream->Finish(std::move(c));
}

void Engine::CancelEverything(FinishReason reason, const std::string& message, const std::string& code) {
  std::deque<Job> jobs;
  jobs.swap(waiting_);
  for (Job& job : jobs) FinishWaiting(job, reason, message, code);
  for (size_t i = running_.size(); i-- > 0;) Retire(i, reason, message, code);
}

void Engine::FailNewestRunning(const std::string& message, const std::string& code) {
  if (running_.empty()) return;
  size_t newest = 0;
  for (size_t i = 1; i < running_.size(); ++i) {
    if (running_[i]->admitted >= running_[newest]->admitted) newest = i;
  }
  spdlog::warn("engine: failing request {}: {}", running_[newest]->job.id, message);
  Retire(newest, FinishReason::kError, message, code);
}

void Engine::PublishStats() {
  EngineStats s = counters_;
  s.waiting = static_cast<int32_t>(waiting_.size());
  s.prefilling = 0;
  s.generating = 0;
  s.kv_cells_used = 0;
  for (const auto& seq : running_) {
    (seq->generating ? s.generating : s.prefilling)++;
    s.kv_cells_used += seq->n_past;
  }
  s.slots_busy = static_cast<int32_t>(running_.size());
  if (cache_) {
    const PrefixCacheStats c = cache_->stats();
    s.kv_cells_retained = c.retained_cells;
    s.retained_sequences = c.retained_sequences;
    s.device_hits = c.device_hits;
    s.device_tokens = c.device_tokens;
    s.hot_blocks = c.hot_blocks;
    s.ssd_blocks = c.ssd_blocks;
    s.restore_errors = c.restore_errors;
    s.exported_blocks = c.exported_blocks;
    s.pending_exports = c.pending_exports;
    s.restore_ms = c.restore_ms;
    s.export_ms = c.export_ms;
  }
  s.admission_paused = admission_paused_.load();
  for (const auto& seq : running_) {
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(seq->admitted.time_since_epoch()).count();
    s.newest_admission_ns = std::max(s.newest_admission_ns, ns);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.pending_commands = static_cast<int32_t>(commands_.size());
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_ = s;
}

}  // namespace llmux
