// EnginePool policy with fake engines: LRU eviction, pinning, TTL, leases,
// single-flight loads, 507 messages, the settle barrier and teardown.
#include "pool/engine_pool.h"

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

namespace llmux {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t MiB = 1ull << 20;

// The fake world: what is "resident", what happened, what should fail.
struct World {
  std::mutex mu;
  std::map<std::string, uint64_t> sizes;  // footprint of each model
  uint64_t resident = 100 * MiB;          // process bytes (baseline)
  bool free_releases_memory = true;       // FreeWeights lowers `resident`
  double resident_fraction = 1.0;         // how much of the predicted footprint a load really touches
  std::map<std::string, int> loads;
  std::vector<std::string> events;
  std::set<std::string> throw_on_stop;
  std::set<std::string> fail_load;
  std::map<std::string, int64_t> newest_admission;
  std::map<std::string, bool> paused;
  std::vector<std::string> failed_newest;
  std::function<void(const std::string&)> on_cancel;
  int reclaims = 0;
  // Blocks loads while true (single-flight test).
  bool hold_loads = false;
  std::condition_variable load_released;

  void Event(std::string e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(std::move(e));
  }
};

class FakeInstance final : public ModelInstance {
 public:
  FakeInstance(World* w, std::string id) : w_(w), id_(std::move(id)) {}
  Engine* engine() override { return nullptr; }
  EngineStats Stats() const override {
    EngineStats s;
    std::lock_guard<std::mutex> lock(w_->mu);
    auto it = w_->newest_admission.find(id_);
    if (it != w_->newest_admission.end()) s.newest_admission_ns = it->second;
    return s;
  }
  void CancelAll(const std::string&, const std::string& code) override {
    w_->Event("cancel " + id_ + " " + code);
    if (w_->on_cancel) w_->on_cancel(id_);
  }
  void FailNewest(const std::string&, const std::string& code) override {
    std::lock_guard<std::mutex> lock(w_->mu);
    w_->failed_newest.push_back(id_ + " " + code);
  }
  void SetAdmissionPaused(bool paused) override {
    std::lock_guard<std::mutex> lock(w_->mu);
    w_->paused[id_] = paused;
  }
  void StopEngine() override {
    w_->Event("stop " + id_);
    if (w_->throw_on_stop.count(id_)) throw std::runtime_error("injected stop failure");
  }
  void FreeWeights() override {
    w_->Event("free " + id_);
    std::lock_guard<std::mutex> lock(w_->mu);
    if (w_->free_releases_memory) {
      w_->resident -= static_cast<uint64_t>(w_->resident_fraction * static_cast<double>(w_->sizes[id_]));
    }
  }

 private:
  World* w_;
  std::string id_;
};

class FakeLoader final : public ModelLoader {
 public:
  explicit FakeLoader(World* w) : w_(w) {}
  bool Predict(const ModelEntry& e, const EngineOptions&, uint64_t* bytes, std::string*) override {
    std::lock_guard<std::mutex> lock(w_->mu);
    *bytes = w_->sizes.at(e.id);
    return true;
  }
  std::unique_ptr<ModelInstance> Load(const ModelEntry& e, const EngineOptions&, std::string* error) override {
    std::unique_lock<std::mutex> lock(w_->mu);
    w_->load_released.wait(lock, [&] { return !w_->hold_loads; });
    ++w_->loads[e.id];
    if (w_->fail_load.count(e.id)) {
      *error = "injected load failure";
      return nullptr;
    }
    w_->resident += static_cast<uint64_t>(w_->resident_fraction * static_cast<double>(w_->sizes.at(e.id)));
    w_->events.push_back("load " + e.id);
    return std::make_unique<FakeInstance>(w_, e.id);
  }

 private:
  World* w_;
};

class FakeProbe final : public MemoryProbe {
 public:
  explicit FakeProbe(World* w) : w_(w) {}
  uint64_t ProcessBytes() override {
    std::lock_guard<std::mutex> lock(w_->mu);
    return w_->resident;
  }
  uint64_t MachineAvailableBytes() override { return 8ull << 30; }
  void ReturnFreedMemory() override {
    std::lock_guard<std::mutex> lock(w_->mu);
    ++w_->reclaims;
  }

 private:
  World* w_;
};

class EnginePoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("llmux-pool-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "models");
    for (const char* id : {"a", "b", "c"}) std::ofstream(dir_ / "models" / (std::string(id) + ".gguf")) << "x";
    std::string error;
    ASSERT_TRUE(registry_.AddDirectory((dir_ / "models").string(), &error)) << error;
    ASSERT_TRUE(settings_.Open((dir_ / "settings.json").string(), &error)) << error;
    world_.sizes = {{"a", 100 * MiB}, {"b", 200 * MiB}, {"c", 300 * MiB}};
    options_.tick = std::chrono::milliseconds(0);  // the tests tick by hand
    options_.predict_at_start = false;
    options_.settle_poll = std::chrono::milliseconds(1);
    options_.settle_timeout = std::chrono::milliseconds(30);
    options_.drain_timeout = std::chrono::milliseconds(200);
    options_.clock = [this] { return now_; };
  }
  void TearDown() override {
    pool_.reset();
    fs::remove_all(dir_);
  }
  EnginePool& Pool() {
    if (!pool_) pool_ = std::make_unique<EnginePool>(registry_, settings_, loader_, probe_, ledger_, options_);
    return *pool_;
  }
  ModelState StateOf(const std::string& id) {
    for (const ModelStatus& m : Pool().Status().models) {
      if (m.id == id) return m.state;
    }
    return ModelState::kUnloaded;
  }
  // Acquires and drops a lease: the model is used once and left idle.
  void Use(const std::string& id) {
    Acquired a = Pool().Acquire(id);
    ASSERT_TRUE(a.ok()) << a.message;
    now_ += std::chrono::seconds(1);
  }

  World world_;
  FakeLoader loader_{&world_};
  FakeProbe probe_{&world_};
  ModelRegistry registry_;
  ModelSettingsStore settings_;
  MemoryLedger ledger_;
  PoolOptions options_;
  PoolOptions::Clock::time_point now_ = PoolOptions::Clock::time_point(std::chrono::hours(1));
  fs::path dir_;
  std::unique_ptr<EnginePool> pool_;
};

TEST_F(EnginePoolTest, EvictsTheLeastRecentlyUsedIdleModel) {
  options_.max_model_bytes = 550 * MiB;  // b + c fit, a + b + c do not
  Use("a");
  Use("b");
  Use("c");
  EXPECT_EQ(StateOf("a"), ModelState::kUnloaded);
  EXPECT_EQ(StateOf("b"), ModelState::kLoaded);
  EXPECT_EQ(StateOf("c"), ModelState::kLoaded);
  Use("b");  // b is now more recent than c
  Use("a");  // room for a: the LRU is c
  EXPECT_EQ(StateOf("c"), ModelState::kUnloaded);
  EXPECT_EQ(StateOf("a"), ModelState::kLoaded);
  EXPECT_EQ(StateOf("b"), ModelState::kLoaded);
  EXPECT_EQ(Pool().ledger().models(), 300 * MiB);
  EXPECT_EQ(Pool().Status().evictions, 2u);
}

TEST_F(EnginePoolTest, AdmissionCountsMeasuredProcessMemory) {
  options_.soft_limit_bytes = 700 * MiB;
  world_.resident = 450 * MiB;  // something else is resident: measured beats the (empty) ledger
  Acquired a = Pool().Acquire("c");
  EXPECT_FALSE(a.ok());
  EXPECT_EQ(a.failure, AcquireFailure::kInsufficientMemory);
  EXPECT_TRUE(Pool().Acquire("a").ok());  // 450 + 100 fits
}

TEST_F(EnginePoolTest, AModelLargerThanALimitIsRefusedAtOnce) {
  options_.max_model_bytes = 250 * MiB;
  Acquired a = Pool().Acquire("c");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.failure, AcquireFailure::kInsufficientMemory);
  EXPECT_NE(a.message.find("needs 300.0 MiB, more than --max-model-memory (250.0 MiB)"), std::string::npos) << a.message;
  EXPECT_EQ(world_.loads["c"], 0);
}

TEST_F(EnginePoolTest, BusyModelsAreNeverEvictedAndTheMessageSaysSo) {
  options_.max_model_bytes = 400 * MiB;  // a + b fit; c fits only with b gone
  Acquired held_a = Pool().Acquire("a");
  Acquired held_b = Pool().Acquire("b");
  ASSERT_TRUE(held_a.ok() && held_b.ok());
  Acquired c = Pool().Acquire("c");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.failure, AcquireFailure::kInsufficientMemory);
  EXPECT_NE(c.message.find("cannot load model 'c': it needs 300.0 MiB"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("models in use: 300.0 MiB of --max-model-memory 400.0 MiB"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("all loaded models are busy"), std::string::npos) << c.message;
  EXPECT_EQ(StateOf("a"), ModelState::kLoaded);
  EXPECT_EQ(StateOf("b"), ModelState::kLoaded);
  held_b.lease.reset();
  EXPECT_TRUE(Pool().Acquire("c").ok());  // b is idle now and goes
  EXPECT_EQ(StateOf("b"), ModelState::kUnloaded);
}

TEST_F(EnginePoolTest, PinnedModelsAreNeverEvicted) {
  options_.max_model_bytes = 550 * MiB;
  options_.pinned = {"a"};
  Pool().PreloadPinned();
  EXPECT_EQ(StateOf("a"), ModelState::kLoaded);
  Use("b");
  Use("c");  // needs room: b goes, not the older but pinned a
  EXPECT_EQ(StateOf("a"), ModelState::kLoaded);
  EXPECT_EQ(StateOf("b"), ModelState::kUnloaded);
  Pool().Tick();
  EXPECT_EQ(StateOf("a"), ModelState::kLoaded);
}

TEST_F(EnginePoolTest, WhenAllLoadedModelsArePinnedTheMessageSaysSo) {
  options_.max_model_bytes = 350 * MiB;
  ASSERT_FALSE(std::holds_alternative<SettingsError>(settings_.Update("a", {{"pinned", true}}, registry_)));
  ASSERT_FALSE(std::holds_alternative<SettingsError>(settings_.Update("b", {{"pinned", true}}, registry_)));
  Pool().PreloadPinned();
  Acquired c = Pool().Acquire("c");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message.find("all loaded models are pinned"), std::string::npos) << c.message;
}

TEST_F(EnginePoolTest, TtlUnloadsIdleModelsButNotLeasedOnes) {
  options_.idle_ttl = std::chrono::seconds(10);
  Use("a");
  Acquired held_b = Pool().Acquire("b");
  now_ += std::chrono::seconds(5);
  Pool().Tick();
  EXPECT_EQ(StateOf("a"), ModelState::kLoaded);
  now_ += std::chrono::seconds(6);
  Pool().Tick();
  EXPECT_EQ(StateOf("a"), ModelState::kUnloaded);
  EXPECT_EQ(StateOf("b"), ModelState::kLoaded);  // leased: never unloaded by TTL
  held_b.lease.reset();
  now_ += std::chrono::seconds(9);
  Pool().Tick();
  EXPECT_EQ(StateOf("b"), ModelState::kLoaded);  // the TTL counts from when the lease ended
  now_ += std::chrono::seconds(2);
  Pool().Tick();
  EXPECT_EQ(StateOf("b"), ModelState::kUnloaded);
}

TEST_F(EnginePoolTest, PerModelTtlOverridesTheGlobalOne) {
  options_.idle_ttl = std::chrono::seconds(10);
  ASSERT_FALSE(std::holds_alternative<SettingsError>(settings_.Update("a", {{"ttl_seconds", 0}}, registry_)));
  ASSERT_FALSE(std::holds_alternative<SettingsError>(settings_.Update("b", {{"ttl_seconds", 2}}, registry_)));
  Use("a");
  Use("b");
  now_ += std::chrono::seconds(3);
  Pool().Tick();
  EXPECT_EQ(StateOf("b"), ModelState::kUnloaded);
  now_ += std::chrono::hours(1);
  Pool().Tick();
  EXPECT_EQ(StateOf("a"), ModelState::kLoaded);  // ttl_seconds 0: never by TTL
}

TEST_F(EnginePoolTest, ConcurrentFirstRequestsShareOneLoad) {
  world_.hold_loads = true;
  std::atomic<int> served{0};
  std::vector<std::optional<Lease>> leases(6);
  std::mutex mu;
  for (int i = 0; i < 6; ++i) {
    Pool().AcquireAsync("a", [&, i](Acquired a) {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_TRUE(a.ok()) << a.message;
      leases[static_cast<size_t>(i)] = std::move(a.lease);
      ++served;
    });
  }
  EXPECT_EQ(served.load(), 0);
  EXPECT_EQ(StateOf("a"), ModelState::kLoading);
  {
    std::lock_guard<std::mutex> lock(world_.mu);
    world_.hold_loads = false;
  }
  world_.load_released.notify_all();
  for (int i = 0; i < 500 && served.load() < 6; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(served.load(), 6);
  EXPECT_EQ(world_.loads["a"], 1);
  std::lock_guard<std::mutex> lock(mu);
  for (auto& l : leases) l.reset();
}

TEST_F(EnginePoolTest, ALoadInProgressDoesNotDelayALoadedModel) {
  Use("b");
  world_.hold_loads = true;
  std::atomic<bool> a_served{false};
  Pool().AcquireAsync("a", [&](Acquired) { a_served = true; });
  std::atomic<bool> b_served{false};
  Pool().AcquireAsync("b", [&](Acquired acquired) { b_served = acquired.ok(); });
  EXPECT_TRUE(b_served.load());  // answered on this thread, while a is still loading
  EXPECT_FALSE(a_served.load());
  {
    std::lock_guard<std::mutex> lock(world_.mu);
    world_.hold_loads = false;
  }
  world_.load_released.notify_all();
  for (int i = 0; i < 500 && !a_served.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_TRUE(a_served.load());
}

TEST_F(EnginePoolTest, AFailedLoadLeavesNothingBehind) {
  world_.fail_load.insert("a");
  Acquired a = Pool().Acquire("a");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.failure, AcquireFailure::kLoadFailed);
  EXPECT_NE(a.message.find("injected load failure"), std::string::npos);
  EXPECT_EQ(StateOf("a"), ModelState::kUnloaded);
  EXPECT_EQ(Pool().ledger().total(), 0u);
  world_.fail_load.clear();
  EXPECT_TRUE(Pool().Acquire("a").ok());  // and it can be tried again
}

TEST_F(EnginePoolTest, UnknownModelsListTheAvailableOnes) {
  Acquired x = Pool().Acquire("nope");
  EXPECT_EQ(x.failure, AcquireFailure::kUnknownModel);
  EXPECT_NE(x.message.find("available models: a, b, c"), std::string::npos) << x.message;
}

TEST_F(EnginePoolTest, NamesResolveByCaseAndAlias) {
  ASSERT_FALSE(std::holds_alternative<SettingsError>(settings_.Update("b", {{"alias", "bee"}}, registry_)));
  EXPECT_TRUE(Pool().Acquire("A").ok());
  Acquired b = Pool().Acquire("BEE");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.lease->model().id, "b");
}

TEST_F(EnginePoolTest, TeardownContinuesPastAFailingStep) {
  world_.throw_on_stop.insert("a");
  Use("a");
  const UnloadOutcome u = Pool().Unload("a", "test");
  EXPECT_TRUE(u.unloaded);
  ASSERT_EQ(u.failed_steps.size(), 1u);
  EXPECT_NE(u.failed_steps[0].find("stop engine"), std::string::npos);
  EXPECT_EQ(StateOf("a"), ModelState::kUnloaded);
  EXPECT_EQ(Pool().ledger().total(), 0u);
  std::lock_guard<std::mutex> lock(world_.mu);
  EXPECT_NE(std::find(world_.events.begin(), world_.events.end(), "free a"), world_.events.end());  // weights still freed
  EXPECT_GE(world_.reclaims, 1);  // malloc_trim still ran
}

TEST_F(EnginePoolTest, SettleWaitsForTheMemoryToGo) {
  Use("a");
  const UnloadOutcome u = Pool().Unload("a", "test");
  EXPECT_TRUE(u.settled);
  EXPECT_FALSE(u.indeterminate);
  EXPECT_EQ(u.freed_bytes, static_cast<int64_t>(100 * MiB));
}

// The prediction includes worst-case compute buffers a model may never touch:
// the barrier waits for what the load was measured to take, not the prediction.
TEST_F(EnginePoolTest, SettleJudgesByTheMeasuredLoadWhenThePredictionIsHigher) {
  options_.settle_timeout = std::chrono::seconds(5);
  world_.resident_fraction = 0.4;  // c is predicted at 300 MiB but touches 120 MiB
  Use("c");
  const auto t0 = std::chrono::steady_clock::now();
  const UnloadOutcome u = Pool().Unload("c", "test");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_TRUE(u.settled);
  EXPECT_EQ(u.footprint_bytes, 300 * MiB);
  EXPECT_EQ(u.settle_target_bytes, static_cast<int64_t>(120 * MiB - 64 * MiB));
}

TEST_F(EnginePoolTest, SettleTimesOutThenReclaimsWhenMemoryStays) {
  world_.free_releases_memory = false;
  Use("a");
  const auto t0 = std::chrono::steady_clock::now();
  const UnloadOutcome u = Pool().Unload("a", "test");
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(u.settled);
  EXPECT_GE(waited, options_.settle_timeout);
  EXPECT_GE(world_.reclaims, 2);  // the teardown step and the emergency reclaim
  EXPECT_EQ(Pool().Status().settle_timeouts, 1u);
  EXPECT_EQ(Pool().ledger().total(), 0u);  // decremented after the barrier anyway
}

TEST_F(EnginePoolTest, SettleIsSkippedWhileAnotherModelServes) {
  world_.free_releases_memory = false;  // would time out if it waited
  options_.settle_timeout = std::chrono::seconds(5);
  Use("a");
  Acquired held_b = Pool().Acquire("b");
  const auto t0 = std::chrono::steady_clock::now();
  const UnloadOutcome u = Pool().Unload("a", "test");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_TRUE(u.unloaded);
  EXPECT_TRUE(u.indeterminate);
  EXPECT_EQ(Pool().Status().settle_skipped, 1u);
}

TEST_F(EnginePoolTest, UnloadingABusyModelCancelsItsRequestsFirst) {
  std::optional<Lease> held;
  {
    Acquired a = Pool().Acquire("a");
    held = std::move(a.lease);
  }
  // A request ends (and drops its lease) when its engine cancels it.
  world_.on_cancel = [&](const std::string&) {
    std::thread([&] { held.reset(); }).detach();
  };
  const UnloadOutcome u = Pool().Unload("a", "test");
  EXPECT_TRUE(u.unloaded) << u.error;
  std::lock_guard<std::mutex> lock(world_.mu);
  ASSERT_GE(world_.events.size(), 3u);
  EXPECT_EQ(world_.events[1], "cancel a model_unloaded");
  EXPECT_EQ(world_.events[2], "stop a");
}

TEST_F(EnginePoolTest, AModelStillHeldAfterTheDrainTimeoutStaysLoaded) {
  Acquired a = Pool().Acquire("a");
  const UnloadOutcome u = Pool().Unload("a", "test");
  EXPECT_FALSE(u.unloaded);
  EXPECT_NE(u.error.find("still hold"), std::string::npos);
  EXPECT_EQ(StateOf("a"), ModelState::kLoaded);  // never freed while held
  std::lock_guard<std::mutex> lock(world_.mu);
  EXPECT_EQ(std::count(world_.events.begin(), world_.events.end(), "stop a"), 0);
}

TEST_F(EnginePoolTest, EnforcerEvictsIdleModelsAboveTheSoftLimit) {
  options_.soft_limit_bytes = 2000 * MiB;
  Use("a");
  Use("b");
  world_.resident += 2000 * MiB;  // something grew
  Pool().Tick();
  EXPECT_EQ(StateOf("a"), ModelState::kUnloaded);  // the LRU one
  EXPECT_EQ(StateOf("b"), ModelState::kLoaded);
}

TEST_F(EnginePoolTest, EnforcerPausesAdmissionWhenNothingCanBeEvictedAndResumes) {
  options_.soft_limit_bytes = 1000 * MiB;
  Acquired held = Pool().Acquire("a");
  world_.resident += 1000 * MiB;
  Pool().Tick();
  EXPECT_TRUE(Pool().Status().admission_paused);
  {
    std::lock_guard<std::mutex> lock(world_.mu);
    EXPECT_TRUE(world_.paused["a"]);
  }
  world_.resident -= 1000 * MiB;
  Pool().Tick();
  EXPECT_FALSE(Pool().Status().admission_paused);
  std::lock_guard<std::mutex> lock(world_.mu);
  EXPECT_FALSE(world_.paused["a"]);
}

TEST_F(EnginePoolTest, EnforcerFailsTheNewestRequestAboveTheHardLimit) {
  options_.soft_limit_bytes = 1000 * MiB;
  options_.hard_limit_bytes = 1500 * MiB;
  Acquired held_a = Pool().Acquire("a");
  Acquired held_b = Pool().Acquire("b");
  {
    std::lock_guard<std::mutex> lock(world_.mu);
    world_.newest_admission = {{"a", 500}, {"b", 900}};
    world_.resident += 2000 * MiB;
  }
  Pool().Tick();
  std::lock_guard<std::mutex> lock(world_.mu);
  ASSERT_EQ(world_.failed_newest.size(), 1u);
  EXPECT_EQ(world_.failed_newest[0], "b insufficient_memory");
}

TEST_F(EnginePoolTest, ShutdownUnloadsEverythingAndRefusesNewLeases) {
  Use("a");
  Use("b");
  Pool().Shutdown(std::chrono::milliseconds(100));
  EXPECT_EQ(StateOf("a"), ModelState::kUnloaded);
  EXPECT_EQ(StateOf("b"), ModelState::kUnloaded);
  EXPECT_EQ(Pool().Acquire("a").failure, AcquireFailure::kShuttingDown);
}

}  // namespace
}  // namespace llmux
