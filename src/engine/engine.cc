#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>

#include "engine/scheduler.h"
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
  int32_t prompt_done = 0;   // prompt tokens already decoded
  Pos n_past = 0;            // tokens in this sequence's KV cells
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
  enum class Kind { kSubmit, kCancel, kCancelAll, kFailNewest, kWake, kStop };
  Kind kind = Kind::kStop;
  Job job;              // kSubmit
  uint64_t id = 0;      // kCancel
  std::string reason;   // kCancelAll, kFailNewest
  std::string code;     // kCancelAll, kFailNewest
};

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
      ReleaseRetained(0, 0);  // idle: nobody to disturb
      runtime::ReleaseComputeThreads();  // an idle team would slow the engines that work
    }
    PublishStats();
  }
  CancelEverything(FinishReason::kCancelled, "the model was unloaded", "model_unloaded");
  ReleaseRetained(0, 0);
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
  auto seq = std::make_unique<Sequence>(std::move(job));
  seq->seq = free_ids_.back();
  free_ids_.pop_back();
  seq->sampler = runtime::Sampler::Create(*model_, seq->job.request.sampling);
  seq->sampler->Observe(seq->job.request.prompt);
  seq->admitted = Clock::now();
  running_.push_back(std::move(seq));
}

void Engine::Step() {
  SchedulerInput in;
  in.batch_capacity = options_.batch_size;
  in.free_slots = options_.parallel - static_cast<int32_t>(running_.size());
  // Under memory pressure new requests wait, unless nothing runs here at all.
  if (admission_paused_.load() && !running_.empty()) in.free_slots = 0;
  in.running.reserve(running_.size());
  for (const auto& s : running_) {
    in.running.push_back({s->job.id, s->generating, s->prompt_size() - s->prompt_done});
  }
  for (size_t i = 0; i < waiting_.size() && static_cast<int32_t>(i) < in.free_slots; ++i) {
    in.waiting_prompts.push_back(static_cast<int32_t>(waiting_[i].request.prompt.size()));
  }
  const StepPlan plan = PlanStep(in);

  // Every running or admitted sequence may grow to its full context: keep
  // only the retained cells that this worst case leaves free.
  // Sequence ids: running + retained + admitted must fit the 2 * parallel ids.
  const int64_t busy = static_cast<int64_t>(running_.size()) + plan.admit;
  ReleaseRetained((options_.parallel - busy) * options_.context_per_sequence,
                  static_cast<size_t>(2 * options_.parallel - busy));

  for (int32_t a = 0; a < plan.admit; ++a) {
    Admit(std::move(waiting_.front()));
    waiting_.pop_front();
  }

  batch_->Clear();
  std::vector<Sequence*> in_batch;
  for (size_t i : plan.decode) {
    Sequence& s = *running_[i];
    s.batch_index = batch_->Add(s.next_token, s.n_past, s.seq, /*want_logits=*/true);
    ++s.n_past;
    in_batch.push_back(&s);
  }
  int32_t prompt_tokens = 0;
  for (const StepPlan::Prefill& p : plan.prefill) {
    Sequence& s = *running_[p.index];
    for (int32_t k = 0; k < p.tokens; ++k) {
      const bool last = s.prompt_done + 1 == s.prompt_size();
      const int32_t idx = batch_->Add(s.job.request.prompt[static_cast<size_t>(s.prompt_done)], s.n_past, s.seq, last);
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
    retained_.push_back({s->seq, s->n_past});
    retained_cells_ += s->n_past;
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
  while (!retained_.empty() && (retained_cells_ > max_cells || retained_.size() > max_sequences)) {
    retained_cells_ -= retained_.front().cells;
    FreeSequence(retained_.front().seq);
    retained_.pop_front();
  }
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
  s.kv_cells_retained = retained_cells_;
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
