// The Engine on a real (tiny, random-weight) model: completion, batching
// invariance, per-request sampling, cancellation and teardown.
#include "engine/engine.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/model.h"

namespace llmux {
namespace {

std::string ModelPath() {
  const char* dir = std::getenv("LLMUX_MODEL_DIR");
  return std::string(dir != nullptr ? dir : LLMUX_DEFAULT_MODEL_DIR) + "/tiny.gguf";
}

std::unique_ptr<Engine> StartEngine(EngineOptions options = {}) {
  std::string error;
  auto model = runtime::Model::Load(ModelPath(), {}, &error);
  EXPECT_NE(model, nullptr) << error << " (run `make models` first)";
  if (!model) return nullptr;
  options.threads = 2;
  auto engine = Engine::Start(std::move(model), options, &error);
  EXPECT_NE(engine, nullptr) << error;
  return engine;
}

// Collects a stream's output until it finishes.
struct Result {
  std::string text;
  Completion completion;
};

Result Collect(const std::shared_ptr<TokenStream>& stream) {
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  stream->SetListener([&] {
    std::lock_guard<std::mutex> lock(mu);
    ready = true;
    cv.notify_one();
  });
  Result r;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return ready; });
      ready = false;
    }
    TokenStream::Output out = stream->Take();
    r.text += out.text;
    if (out.completion) {
      r.completion = *out.completion;
      break;
    }
  }
  stream->ClearListener();
  return r;
}

GenerationRequest Request(const Engine& e, const std::string& prompt, int32_t max_tokens, float temperature = 0,
                          uint32_t seed = SamplingParams::kRandomSeed) {
  GenerationRequest g;
  g.prompt = e.model().Tokenize(prompt, true, true);
  g.max_tokens = max_tokens;
  g.sampling.temperature = temperature;
  g.sampling.seed = seed;
  return g;
}

bool WaitUntil(const std::function<bool()>& pred, int ms = 5000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

bool Idle(const EngineStats& s) {
  return s.waiting == 0 && s.prefilling == 0 && s.generating == 0 && s.slots_busy == 0 && s.kv_cells_used == 0;
}

TEST(Engine, CompletesWithLengthAndUsage) {
  auto engine = StartEngine();
  ASSERT_TRUE(engine);
  GenerationRequest g = Request(*engine, "Hello world", 8);
  const int32_t n_prompt = static_cast<int32_t>(g.prompt.size());
  Result r = Collect(engine->Submit(std::move(g)));
  EXPECT_EQ(r.completion.reason, FinishReason::kLength);
  EXPECT_EQ(r.completion.usage.prompt_tokens, n_prompt);
  EXPECT_EQ(r.completion.usage.completion_tokens, 8);
  EXPECT_FALSE(r.text.empty());
  EXPECT_TRUE(WaitUntil([&] { return Idle(engine->Stats()); }));
  EXPECT_EQ(engine->Stats().requests_completed, 1u);
}

TEST(Engine, GreedyOutputIsTheSameAloneAndBatched) {
  auto engine = StartEngine();
  ASSERT_TRUE(engine);
  const Result alone = Collect(engine->Submit(Request(*engine, "Batch me", 40)));
  std::vector<std::shared_ptr<TokenStream>> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(engine->Submit(Request(*engine, "Batch me", 40)));
  // Hot requests beside the greedy ones, outliving them.
  for (int i = 0; i < 3; ++i) streams.push_back(engine->Submit(Request(*engine, "Noise " + std::to_string(i), 200, 1.5f, i)));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Collect(streams[static_cast<size_t>(i)]).text, alone.text) << "stream " << i;
  for (size_t i = 4; i < streams.size(); ++i) Collect(streams[i]);
}

// A neighbour that finishes early must not change a running greedy request:
// its cells are retained, so the survivors' next tokens stay in position order.
// A long "pacer" request runs throughout both runs so every step decodes at
// least two rows (llama.cpp uses another matmul kernel for a single row).
TEST(Engine, AnEarlyFinisherDoesNotChangeItsNeighboursOutput) {
  EngineOptions o;
  o.prefix_cache = false;  // the second run must compute, not adopt the first run's cells
  auto engine = StartEngine(o);
  ASSERT_TRUE(engine);
  auto run = [&](bool with_early_finisher) {
    GenerationRequest pacer = Request(*engine, "Pacer", 3000);
    pacer.ignore_eos = true;
    auto p = engine->Submit(std::move(pacer));
    EXPECT_TRUE(WaitUntil([&] { return engine->Stats().generating == 1; }));
    std::shared_ptr<TokenStream> early;
    if (with_early_finisher) early = engine->Submit(Request(*engine, "Early bird", 40));
    std::vector<std::shared_ptr<TokenStream>> late;
    for (int i = 0; i < 3; ++i) late.push_back(engine->Submit(Request(*engine, "Neighbours", 200)));
    std::vector<std::string> texts;
    for (auto& s : late) texts.push_back(Collect(s).text);
    if (early) EXPECT_EQ(Collect(early).completion.reason, FinishReason::kLength);
    engine->Cancel(p->request_id());
    Collect(p);
    return texts;
  };
  const std::vector<std::string> reference = run(false);
  EXPECT_EQ(reference[1], reference[0]);
  EXPECT_EQ(reference[2], reference[0]);
  const std::vector<std::string> with_early = run(true);
  for (const std::string& t : with_early) EXPECT_EQ(t, reference[0]);
  EXPECT_TRUE(WaitUntil([&] { return engine->Stats().kv_cells_retained == 0; }));  // released once idle
}

TEST(Engine, RetainedCellsNeverStarveRunningSequences) {
  EngineOptions o;
  o.parallel = 2;
  o.context_per_sequence = 64;
  auto engine = StartEngine(o);
  ASSERT_TRUE(engine);
  // A long runner fills its context while many short requests complete beside it,
  // more than the sequence ids and cells could hold if nothing were released.
  GenerationRequest g;
  g.prompt = Tokens(8, 100);
  g.ignore_eos = true;
  auto runner = engine->Submit(std::move(g));
  std::vector<std::shared_ptr<TokenStream>> shorts;
  for (int i = 0; i < 12; ++i) {
    GenerationRequest s;
    s.prompt = Tokens(20, static_cast<Token>(200 + i));
    s.max_tokens = 30;
    s.ignore_eos = true;
    shorts.push_back(engine->Submit(std::move(s)));
  }
  for (auto& s : shorts) EXPECT_EQ(Collect(s).completion.reason, FinishReason::kLength);
  const Result r = Collect(runner);
  EXPECT_EQ(r.completion.reason, FinishReason::kLength);
  EXPECT_EQ(r.completion.usage.completion_tokens, 64 - 8 + 1);
  EXPECT_EQ(engine->Stats().requests_failed, 0u);
}

TEST(Engine, EachRequestSamplesWithItsOwnSeed) {
  auto engine = StartEngine();
  ASSERT_TRUE(engine);
  auto a = engine->Submit(Request(*engine, "Dice", 30, 1.0f, 11));
  auto b = engine->Submit(Request(*engine, "Dice", 30, 1.0f, 11));
  auto c = engine->Submit(Request(*engine, "Dice", 30, 1.0f, 12));
  const std::string ta = Collect(a).text, tb = Collect(b).text, tc = Collect(c).text;
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST(Engine, TopKOneMatchesGreedy) {
  auto engine = StartEngine();
  ASSERT_TRUE(engine);
  const std::string greedy = Collect(engine->Submit(Request(*engine, "Same", 30))).text;
  GenerationRequest g = Request(*engine, "Same", 30, 0.7f, 5);
  g.sampling.top_k = 1;
  EXPECT_EQ(Collect(engine->Submit(std::move(g))).text, greedy);
}

TEST(Engine, CancellingARunningRequestFreesItsSlotAndCells) {
  auto engine = StartEngine();
  ASSERT_TRUE(engine);
  GenerationRequest g = Request(*engine, "Forever", -1);
  g.ignore_eos = true;
  auto stream = engine->Submit(std::move(g));
  ASSERT_TRUE(WaitUntil([&] { return engine->Stats().generating == 1; }));
  engine->Cancel(stream->request_id());
  Result r = Collect(stream);
  EXPECT_EQ(r.completion.reason, FinishReason::kCancelled);
  EXPECT_TRUE(WaitUntil([&] { return Idle(engine->Stats()); }, 1000));
  EXPECT_EQ(engine->Stats().requests_cancelled, 1u);
}

TEST(Engine, CancellingAQueuedRequestRemovesItFromTheQueue) {
  EngineOptions o;
  o.parallel = 1;
  auto engine = StartEngine(o);
  ASSERT_TRUE(engine);
  GenerationRequest g = Request(*engine, "First", -1);
  g.ignore_eos = true;
  auto first = engine->Submit(std::move(g));
  auto second = engine->Submit(Request(*engine, "Second", 5));
  ASSERT_TRUE(WaitUntil([&] { return engine->Stats().waiting == 1; }));
  engine->Cancel(second->request_id());
  EXPECT_EQ(Collect(second).completion.reason, FinishReason::kCancelled);
  EXPECT_EQ(engine->Stats().generating, 1);
  engine->Cancel(first->request_id());
  EXPECT_EQ(Collect(first).completion.reason, FinishReason::kCancelled);
  EXPECT_TRUE(WaitUntil([&] { return Idle(engine->Stats()); }));
}

TEST(Engine, CancelAllEndsEveryRequestWithTheReason) {
  EngineOptions o;
  o.parallel = 2;
  auto engine = StartEngine(o);
  ASSERT_TRUE(engine);
  std::vector<std::shared_ptr<TokenStream>> streams;
  for (int i = 0; i < 5; ++i) {
    GenerationRequest g = Request(*engine, "All " + std::to_string(i), -1);
    g.ignore_eos = true;
    streams.push_back(engine->Submit(std::move(g)));
  }
  ASSERT_TRUE(WaitUntil([&] { return engine->Stats().generating == 2; }));
  engine->CancelAll("unloading");
  for (auto& s : streams) {
    Result r = Collect(s);
    EXPECT_EQ(r.completion.reason, FinishReason::kCancelled);
    EXPECT_EQ(r.completion.error, "unloading");
  }
  EXPECT_TRUE(WaitUntil([&] { return Idle(engine->Stats()); }));
}

TEST(Engine, DestroyingTheEngineFinishesEveryStream) {
  std::vector<std::shared_ptr<TokenStream>> streams;
  {
    auto engine = StartEngine();
    ASSERT_TRUE(engine);
    for (int i = 0; i < 12; ++i) {
      GenerationRequest g = Request(*engine, "Teardown " + std::to_string(i), -1);
      g.ignore_eos = true;
      streams.push_back(engine->Submit(std::move(g)));
    }
  }
  for (auto& s : streams) {
    EXPECT_TRUE(s->finished());
    EXPECT_EQ(s->Take().completion->reason, FinishReason::kCancelled);
  }
}

TEST(Engine, APromptThatDoesNotFitFailsAtOnce) {
  EngineOptions o;
  o.context_per_sequence = 16;
  auto engine = StartEngine(o);
  ASSERT_TRUE(engine);
  GenerationRequest g;
  g.prompt = Tokens(16, 100);
  Result r = Collect(engine->Submit(std::move(g)));
  EXPECT_EQ(r.completion.reason, FinishReason::kError);
  Result empty = Collect(engine->Submit(GenerationRequest{}));
  EXPECT_EQ(empty.completion.reason, FinishReason::kError);
}

TEST(Engine, AFullContextEndsGenerationWithLength) {
  EngineOptions o;
  o.context_per_sequence = 64;
  auto engine = StartEngine(o);
  ASSERT_TRUE(engine);
  GenerationRequest g;
  g.prompt = Tokens(10, 100);
  g.ignore_eos = true;
  Result r = Collect(engine->Submit(std::move(g)));
  EXPECT_EQ(r.completion.reason, FinishReason::kLength);
  // Positions 0..63 hold the prompt and all but the last sampled token.
  EXPECT_EQ(r.completion.usage.completion_tokens, 64 - 10 + 1);
}

}  // namespace
}  // namespace llmux
