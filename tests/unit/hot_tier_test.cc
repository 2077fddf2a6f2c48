#include "kvcache/hot_tier.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kvcache/ssd_tier.h"
#include "sys/memory_probe.h"

namespace llmux::kv {
namespace {
namespace fs = std::filesystem;
using std::chrono::steady_clock;

constexpr uint64_t kMiB = uint64_t{1} << 20;
const uint64_t kPage = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() / ("llmux-hot-tier-test-" + std::to_string(::getpid()) + "-" +
                                         std::to_string(counter++) + "-" + std::to_string(std::random_device{}()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

Hash H(uint32_t id) {
  Hash h{};
  std::memcpy(h.data(), &id, sizeof id);
  h[31] = 0x5a;
  return h;
}

BlockMeta Meta(uint32_t id, uint32_t model = 1) { return BlockMeta{H(id), H(1000000 + model), 16, 2}; }

// A block of `size` bytes, every byte `fill` (so every page is resident).
std::shared_ptr<const BlockBuffer> Block(size_t size, uint8_t fill = 0xab) {
  BlockBuffer b = BlockBuffer::Allocate(size);
  EXPECT_EQ(b.size(), size);
  std::memset(b.data(), fill, size);
  return std::make_shared<const BlockBuffer>(std::move(b));
}

// The invariant: bytes() is the sum of the footprints of the entries held,
// and never above the budget. `known` holds every block the test put.
void ExpectAccounted(const HotTier& tier, const std::map<uint32_t, std::shared_ptr<const BlockBuffer>>& known) {
  uint64_t sum = 0, entries = 0;
  for (const auto& [id, bytes] : known) {
    if (tier.Contains(H(id))) {
      sum += bytes->footprint();
      ++entries;
    }
  }
  EXPECT_EQ(tier.bytes(), sum);
  EXPECT_LE(tier.bytes(), tier.budget());
  const HotTierStats s = tier.stats();
  EXPECT_EQ(s.entries, entries);
  EXPECT_EQ(s.bytes, sum);
}

std::unique_ptr<SsdTier> OpenSsd(const TempDir& dir, uint64_t max_bytes = 256 * kMiB) {
  std::string error;
  auto ssd = SsdTier::Open(SsdTierOptions{.dir = dir.str(), .max_bytes = max_bytes, .queue_capacity = 64}, &error);
  EXPECT_NE(ssd, nullptr) << error;
  return ssd;
}

bool SameBytes(const BlockBuffer& a, const BlockBuffer& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

TEST(HotTierTest, BudgetNeverExceededAndBytesAreTheSumOfEntries) {
  HotTier tier(16 * kPage, nullptr, nullptr);
  std::map<uint32_t, std::shared_ptr<const BlockBuffer>> known;
  std::mt19937 rng(7);
  for (uint32_t i = 0; i < 300; ++i) {
    // Sizes that are not page multiples: the tier accounts whole pages.
    auto bytes = Block(1 + rng() % (5 * kPage));
    known[i] = bytes;
    EXPECT_TRUE(tier.Put(Meta(i), bytes));
    EXPECT_TRUE(tier.Contains(H(i)));
    ExpectAccounted(tier, known);
    if (i % 3 == 0) tier.Get(H(rng() % (i + 1)));
    ExpectAccounted(tier, known);
  }
  const HotTierStats s = tier.stats();
  EXPECT_EQ(s.inserts, 300u);
  EXPECT_EQ(s.inserts - s.evictions, s.entries);
}

TEST(HotTierTest, EvictsLeastRecentlyUsedAndGetRefreshes) {
  HotTier tier(3 * kPage, nullptr, nullptr);
  for (uint32_t id : {1, 2, 3}) ASSERT_TRUE(tier.Put(Meta(id), Block(kPage)));
  ASSERT_NE(tier.Get(H(1)), nullptr);  // order now (LRU first): 2, 3, 1
  ASSERT_TRUE(tier.Put(Meta(4), Block(kPage)));
  EXPECT_FALSE(tier.Contains(H(2)));
  EXPECT_TRUE(tier.Contains(H(1)) && tier.Contains(H(3)) && tier.Contains(H(4)));
  // Put of a held block refreshes it too, without adding bytes.
  ASSERT_TRUE(tier.Put(Meta(3), Block(kPage)));  // order: 1, 4, 3
  EXPECT_EQ(tier.bytes(), 3 * kPage);
  ASSERT_TRUE(tier.Put(Meta(5), Block(2 * kPage)));  // evicts 1 and 4
  EXPECT_FALSE(tier.Contains(H(1)));
  EXPECT_FALSE(tier.Contains(H(4)));
  EXPECT_TRUE(tier.Contains(H(3)) && tier.Contains(H(5)));
  EXPECT_EQ(tier.Get(H(2)), nullptr);
  const HotTierStats s = tier.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.inserts, 5u);
  EXPECT_EQ(s.evictions, 3u);
}

TEST(HotTierTest, EvictionWritesBackToSsd) {
  TempDir dir;
  auto ssd = OpenSsd(dir);
  ASSERT_NE(ssd, nullptr);
  HotTier tier(2 * kPage, ssd.get(), nullptr);
  std::vector<std::shared_ptr<const BlockBuffer>> blocks;
  for (uint32_t id = 0; id < 3; ++id) {
    blocks.push_back(Block(kPage, static_cast<uint8_t>(id + 1)));
    ASSERT_TRUE(tier.Put(Meta(id), blocks.back()));
  }
  EXPECT_FALSE(tier.Contains(H(0)));
  EXPECT_TRUE(ssd->Contains(H(0)));
  EXPECT_EQ(tier.stats().written_back, 1u);
  ASSERT_TRUE(ssd->Flush(steady_clock::now() + std::chrono::seconds(10)));
  auto read = ssd->Read(H(0), Meta(0).model);
  ASSERT_TRUE(read.has_value());
  EXPECT_TRUE(SameBytes(*read, *blocks[0]));
  // Evicting a block that is on the SSD tier already does not write it again.
  ASSERT_TRUE(tier.Put(Meta(0), blocks[0]));  // evicts 1
  ASSERT_TRUE(tier.Put(Meta(1), blocks[1]));  // evicts 2
  ASSERT_TRUE(tier.Put(Meta(3), Block(kPage)));  // evicts 0, already on disk
  EXPECT_EQ(tier.stats().written_back, 3u);  // 0, 1, 2
  EXPECT_EQ(tier.stats().evictions, 4u);
}

TEST(HotTierTest, FlushToSsdQueuesEverythingAndKeepsIt) {
  TempDir dir;
  auto ssd = OpenSsd(dir);
  ASSERT_NE(ssd, nullptr);
  HotTier tier(8 * kPage, ssd.get(), nullptr);
  for (uint32_t id = 0; id < 4; ++id) ASSERT_TRUE(tier.Put(Meta(id), Block(kPage, static_cast<uint8_t>(id))));
  EXPECT_EQ(tier.FlushToSsd(steady_clock::now() + std::chrono::seconds(5)), 4u);
  EXPECT_EQ(tier.FlushToSsd(steady_clock::now() + std::chrono::seconds(5)), 0u);  // already there
  EXPECT_EQ(tier.stats().entries, 4u);
  ASSERT_TRUE(ssd->Flush(steady_clock::now() + std::chrono::seconds(10)));
  for (uint32_t id = 0; id < 4; ++id) {
    EXPECT_TRUE(tier.Contains(H(id)));
    EXPECT_TRUE(ssd->Read(H(id), Meta(id).model).has_value());
  }
  EXPECT_EQ(HotTier(kPage, nullptr, nullptr).FlushToSsd(steady_clock::now()), 0u);
}

TEST(HotTierTest, ClearFreesAndReports) {
  HotTier tier(64 * kPage, nullptr, nullptr);
  for (uint32_t id = 0; id < 5; ++id) ASSERT_TRUE(tier.Put(Meta(id), Block(2 * kPage - 1)));
  const HotClearResult r = tier.Clear();
  EXPECT_EQ(r.entries_cleared, 5u);
  EXPECT_EQ(r.bytes_freed, 10 * kPage);
  EXPECT_EQ(tier.bytes(), 0u);
  EXPECT_EQ(tier.stats().entries, 0u);
  EXPECT_EQ(tier.Get(H(0)), nullptr);
  const HotClearResult again = tier.Clear();
  EXPECT_EQ(again.entries_cleared, 0u);
  EXPECT_EQ(again.bytes_freed, 0u);
}

TEST(HotTierTest, TierOffRejectsEverything) {
  HotTier tier(0, nullptr, nullptr);
  EXPECT_FALSE(tier.Put(Meta(1), Block(kPage)));
  EXPECT_FALSE(tier.Contains(H(1)));
  EXPECT_EQ(tier.bytes(), 0u);
  EXPECT_EQ(tier.stats().rejected, 1u);
}

TEST(HotTierTest, BlockBiggerThanBudgetRejectedWithoutEvicting) {
  HotTier tier(2 * kPage, nullptr, nullptr);
  ASSERT_TRUE(tier.Put(Meta(1), Block(kPage)));
  EXPECT_FALSE(tier.Put(Meta(2), Block(2 * kPage + 1)));  // three pages
  EXPECT_FALSE(tier.Put(Meta(3), nullptr));
  EXPECT_TRUE(tier.Contains(H(1)));
  EXPECT_EQ(tier.bytes(), kPage);
  EXPECT_EQ(tier.stats().rejected, 2u);
  EXPECT_TRUE(tier.Put(Meta(4), Block(2 * kPage)));  // exactly the budget: evicts 1
  EXPECT_FALSE(tier.Contains(H(1)));
  EXPECT_EQ(tier.bytes(), 2 * kPage);
}

TEST(HotTierTest, GetPointerOutlivesClearAndEviction) {
  HotTier tier(kPage, nullptr, nullptr);
  ASSERT_TRUE(tier.Put(Meta(1), Block(kPage, 0x11)));
  auto held = tier.Get(H(1));
  ASSERT_NE(held, nullptr);
  tier.Clear();
  ASSERT_TRUE(tier.Put(Meta(1), Block(kPage, 0x22)));
  auto held2 = tier.Get(H(1));
  ASSERT_TRUE(tier.Put(Meta(2), Block(kPage, 0x33)));  // evicts 1
  ASSERT_EQ(held->size(), kPage);
  for (size_t i = 0; i < kPage; ++i) ASSERT_EQ(held->data()[i], 0x11);
  for (size_t i = 0; i < kPage; ++i) ASSERT_EQ(held2->data()[i], 0x22);
}

TEST(HotTierTest, OnBytesChangedReportsTotals) {
  std::vector<uint64_t> reported;
  HotTier tier(4 * kPage, nullptr, [&](uint64_t total) { reported.push_back(total); });
  ASSERT_TRUE(tier.Put(Meta(1, 1), Block(kPage)));
  ASSERT_TRUE(tier.Put(Meta(2, 2), Block(2 * kPage)));
  ASSERT_TRUE(tier.Put(Meta(2, 2), Block(2 * kPage)));  // refresh: no change, no call
  ASSERT_TRUE(tier.Put(Meta(3, 1), Block(2 * kPage)));  // evicts 1
  EXPECT_FALSE(tier.Put(Meta(4), Block(5 * kPage)));   // rejected: no change, no call
  tier.Clear();
  EXPECT_EQ(reported, (std::vector<uint64_t>{kPage, 3 * kPage, 4 * kPage, 0}));
}

TEST(HotTierTest, ClearReturnsMemoryToTheOs) {
  constexpr int kBlocks = 64;
  HotTier tier(2 * kBlocks * kMiB, nullptr, nullptr);
  const auto before = sys::ReadProcessMemory();
  ASSERT_TRUE(before.has_value());
  for (uint32_t id = 0; id < kBlocks; ++id) ASSERT_TRUE(tier.Put(Meta(id), Block(kMiB)));
  const auto full = sys::ReadProcessMemory();
  EXPECT_EQ(tier.bytes(), kBlocks * kMiB);
  const HotClearResult r = tier.Clear();
  const auto after = sys::ReadProcessMemory();
  EXPECT_EQ(r.bytes_freed, kBlocks * kMiB);
  const int64_t grown = static_cast<int64_t>(full->rss_anon) - static_cast<int64_t>(before->rss_anon);
  const int64_t dropped = static_cast<int64_t>(full->rss_anon) - static_cast<int64_t>(after->rss_anon);
  EXPECT_GE(grown, static_cast<int64_t>(kBlocks * kMiB * 8 / 10));
  EXPECT_GE(dropped, static_cast<int64_t>(kBlocks * kMiB * 8 / 10))
      << "RssAnon " << full->rss_anon / kMiB << " MiB -> " << after->rss_anon / kMiB << " MiB";
}

TEST(HotTierTest, ConcurrentPutGetClearKeepsTheInvariant) {
  TempDir dir;
  auto ssd = OpenSsd(dir, 4 * kMiB);
  ASSERT_NE(ssd, nullptr);
  const uint64_t budget = 24 * kPage;
  std::atomic<bool> over_budget{false};
  HotTier tier(budget, ssd.get(), [&](uint64_t total) {
    if (total > budget) over_budget = true;
  });
  std::map<uint32_t, std::shared_ptr<const BlockBuffer>> known;
  for (uint32_t id = 0; id < 64; ++id) known[id] = Block((1 + id % 4) * kPage, static_cast<uint8_t>(id));

  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      while (!stop) {
        const uint32_t id = rng() % 64;
        switch (rng() % 100) {
          case 0: tier.Clear(); break;
          case 1: tier.Get(H(id)); break;
          case 2: tier.FlushToSsd(steady_clock::now() + std::chrono::milliseconds(1)); break;
          default:
            if (rng() % 2 == 0) {
              tier.Put(Meta(id, id % 3), known.at(id));
            } else if (auto got = tier.Get(H(id))) {
              if (got->data()[0] != static_cast<uint8_t>(id)) over_budget = true;  // wrong block
            }
            if (tier.bytes() > budget) over_budget = true;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_FALSE(over_budget);
  ExpectAccounted(tier, known);
  const HotTierStats s = tier.stats();
  EXPECT_GT(s.inserts, 0u);
  EXPECT_GT(s.hits, 0u);
}

}  // namespace
}  // namespace llmux::kv
