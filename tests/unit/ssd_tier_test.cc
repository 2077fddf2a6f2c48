#include "kvcache/ssd_tier.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace llmux::kv {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr size_t kPayload = 4096;
constexpr uint64_t kFile = kSsdHeaderSize + kPayload;  // size of one block file
constexpr auto kWait = 10s;

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = (fs::temp_directory_path() / ("llmux-ssd-tier-test-" + std::to_string(getpid()) + "-" +
                                          std::to_string(counter++) + "-" + std::to_string(std::random_device{}())))
                .string();
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

Hash MakeHash(uint64_t seed) {
  Hash h;
  for (uint8_t& b : h) b = static_cast<uint8_t>(SplitMix(seed));
  return h;
}

const Hash kModel = MakeHash(1'000'001);
const Hash kOtherModel = MakeHash(1'000'002);

struct TestBlock {
  BlockMeta meta;
  std::shared_ptr<const BlockBuffer> bytes;
};

TestBlock MakeBlock(uint64_t id, size_t size = kPayload, const Hash& model = kModel) {
  auto buffer = std::make_shared<BlockBuffer>(BlockBuffer::Allocate(size));
  uint64_t state = id * 7919 + 17;
  for (size_t i = 0; i < size; ++i) buffer->data()[i] = static_cast<uint8_t>(SplitMix(state));
  return {BlockMeta{MakeHash(id), model, 16, 24, /*k_type=*/1, /*v_type=*/8}, std::move(buffer)};
}

bool SameBytes(const std::optional<BlockBuffer>& got, const TestBlock& want) {
  return got.has_value() && got->size() == want.bytes->size() &&
         std::memcmp(got->data(), want.bytes->data(), got->size()) == 0;
}

std::unique_ptr<SsdTier> OpenTier(const std::string& dir, uint64_t max_bytes, size_t queue_capacity = 64,
                                  std::chrono::milliseconds retry = 60s) {
  std::string error;
  auto tier = SsdTier::Open(SsdTierOptions{dir, max_bytes, queue_capacity, retry}, &error);
  EXPECT_NE(tier, nullptr) << error;
  return tier;
}

bool Write(SsdTier& tier, const TestBlock& block) {
  return tier.Enqueue(block.meta, block.bytes) && tier.Flush(Clock::now() + kWait);
}

std::string PathOf(const std::string& dir, const Hash& hash) {
  const std::string hex = ToHex(hash);
  return dir + "/" + hex.substr(0, 2) + "/" + hex + ".kvb";
}

// Sizes of every regular file under `dir`, as the file system reports them.
uint64_t DiskBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) total += fs::file_size(it->path(), size_ec);
  }
  return total;
}

size_t CountFiles(const std::string& dir, const std::string& containing) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->path().filename().string().find(containing) != std::string::npos) ++n;
  }
  return n;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

void CopyFile(const std::string& from, const std::string& to) {
  fs::create_directories(fs::path(to).parent_path());
  fs::copy_file(from, to);
}

TEST(SsdTierTest, WriteThenReadReturnsTheSameBytes) {
  TempDir dir;
  auto tier = OpenTier(dir.path(), 64 * kFile);
  ASSERT_NE(tier, nullptr);
  const TestBlock a = MakeBlock(1);
  ASSERT_TRUE(Write(*tier, a));
  EXPECT_TRUE(tier->Contains(a.meta.hash));
  EXPECT_FALSE(tier->Contains(MakeHash(2)));
  EXPECT_TRUE(SameBytes(tier->Read(a.meta.hash, kModel), a));
  EXPECT_FALSE(tier->Read(MakeHash(2), kModel).has_value());
  EXPECT_FALSE(tier->Enqueue(a.meta, a.bytes));  // already on disk: refused, not dropped
  EXPECT_EQ(fs::file_size(PathOf(dir.path(), a.meta.hash)), kFile);

  const SsdTierStats s = tier->stats();
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, kFile);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.writes, 1u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_FALSE(s.writes_stopped);
}

TEST(SsdTierTest, FileHasTheDocumentedHeader) {
  TempDir dir;
  auto tier = OpenTier(dir.path(), 64 * kFile);
  ASSERT_NE(tier, nullptr);
  const TestBlock a = MakeBlock(1);
  ASSERT_TRUE(Write(*tier, a));
  std::ifstream in(PathOf(dir.path(), a.meta.hash), std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(file.size(), kFile);
  auto u32 = [&](size_t at) { uint32_t v; std::memcpy(&v, &file[at], 4); return v; };  // little-endian host
  auto u64 = [&](size_t at) { uint64_t v; std::memcpy(&v, &file[at], 8); return v; };
  EXPECT_EQ(file.substr(0, 8), "LLMUXKVB");
  EXPECT_EQ(u32(8), kSsdFormatVersion);
  EXPECT_EQ(u32(12), kSsdHeaderSize);
  EXPECT_EQ(std::memcmp(&file[16], a.meta.hash.data(), 32), 0);
  EXPECT_EQ(std::memcmp(&file[48], kModel.data(), 32), 0);
  EXPECT_EQ(u32(80), 16u);
  EXPECT_EQ(u32(84), 24u);
  EXPECT_EQ(u32(88), 1u);
  EXPECT_EQ(u32(92), 8u);
  EXPECT_EQ(u64(96), kPayload);
  EXPECT_EQ(u64(104), XXH3_64bits(a.bytes->data(), kPayload));
  EXPECT_EQ(u64(112), XXH3_64bits(file.data(), 112));
  EXPECT_EQ(std::memcmp(&file[kSsdHeaderSize], a.bytes->data(), kPayload), 0);
}

TEST(SsdTierTest, ReopenFindsBlocksInTheSameLruOrder) {
  TempDir dir;
  const TestBlock a = MakeBlock(1), b = MakeBlock(2), c = MakeBlock(3);
  {
    auto tier = OpenTier(dir.path(), 64 * kFile);
    ASSERT_NE(tier, nullptr);
    for (const TestBlock* x : {&a, &b, &c}) ASSERT_TRUE(Write(*tier, *x));
    ASSERT_TRUE(tier->Read(a.meta.hash, kModel).has_value());  // A becomes the most recently used
  }
  {
    auto tier = OpenTier(dir.path(), 64 * kFile);  // a plain restart keeps everything
    ASSERT_NE(tier, nullptr);
    EXPECT_EQ(tier->stats().entries, 3u);
    EXPECT_EQ(tier->stats().corrupt_removed, 0u);
  }
  auto tier = OpenTier(dir.path(), 2 * kFile + kFile / 2);  // room for two: the LRU (B) goes
  ASSERT_NE(tier, nullptr);
  EXPECT_EQ(tier->stats().evictions, 1u);
  EXPECT_EQ(tier->stats().entries, 2u);
  EXPECT_FALSE(tier->Contains(b.meta.hash));
  EXPECT_FALSE(fs::exists(PathOf(dir.path(), b.meta.hash)));
  EXPECT_TRUE(SameBytes(tier->Read(a.meta.hash, kModel), a));
  EXPECT_TRUE(SameBytes(tier->Read(c.meta.hash, kModel), c));
}

TEST(SsdTierTest, WriterEvictsTheLeastRecentlyUsed) {
  TempDir dir;
  auto tier = OpenTier(dir.path(), 3 * kFile);
  ASSERT_NE(tier, nullptr);
  const TestBlock a = MakeBlock(1), b = MakeBlock(2), c = MakeBlock(3), d = MakeBlock(4);
  for (const TestBlock* x : {&a, &b, &c}) ASSERT_TRUE(Write(*tier, *x));
  ASSERT_TRUE(tier->Read(a.meta.hash, kModel).has_value());
  ASSERT_TRUE(Write(*tier, d));
  EXPECT_FALSE(tier->Contains(b.meta.hash));
  for (const TestBlock* x : {&a, &c, &d}) EXPECT_TRUE(SameBytes(tier->Read(x->meta.hash, kModel), *x));
  EXPECT_EQ(tier->stats().evictions, 1u);
}

TEST(SsdTierTest, SizeCapIsNeverExceeded) {
  TempDir dir;
  const uint64_t cap = 5 * kFile + kFile / 2;
  auto tier = OpenTier(dir.path(), cap);
  ASSERT_NE(tier, nullptr);
  for (uint64_t id = 1; id <= 20; ++id) {
    ASSERT_TRUE(Write(*tier, MakeBlock(id)));
    EXPECT_LE(DiskBytes(dir.path()), cap) << id;
  }
  const SsdTierStats s = tier->stats();
  EXPECT_EQ(s.entries, 5u);
  EXPECT_EQ(s.bytes, 5 * kFile);
  EXPECT_EQ(s.evictions, 15u);
  EXPECT_EQ(DiskBytes(dir.path()), s.bytes);
  for (uint64_t id = 16; id <= 20; ++id) EXPECT_TRUE(tier->Contains(MakeHash(id))) << id;

  const TestBlock huge = MakeBlock(99, cap);  // header + payload > cap
  EXPECT_FALSE(tier->Enqueue(huge.meta, huge.bytes));
  EXPECT_EQ(tier->stats().dropped, 1u);
}

TEST(SsdTierTest, CorruptPayloadIsAMissAndRemoved) {
  TempDir dir;
  auto tier = OpenTier(dir.path(), 64 * kFile);
  ASSERT_NE(tier, nullptr);
  const TestBlock a = MakeBlock(1);
  ASSERT_TRUE(Write(*tier, a));
  const std::string path = PathOf(dir.path(), a.meta.hash);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kSsdHeaderSize + 100);
    f.put(static_cast<char>(a.bytes->data()[100] ^ 0x01));
  }
  EXPECT_FALSE(tier->Read(a.meta.hash, kModel).has_value());
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(tier->Contains(a.meta.hash));
  const SsdTierStats s = tier->stats();
  EXPECT_EQ(s.corrupt_removed, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.bytes, 0u);
  ASSERT_TRUE(Write(*tier, a));  // it can be written again
  EXPECT_TRUE(SameBytes(tier->Read(a.meta.hash, kModel), a));
}

TEST(SsdTierTest, WrongModelIsAMissAndRemoved) {
  TempDir dir;
  auto tier = OpenTier(dir.path(), 64 * kFile);
  ASSERT_NE(tier, nullptr);
  const TestBlock a = MakeBlock(1, kPayload, kOtherModel);
  ASSERT_TRUE(Write(*tier, a));
  EXPECT_FALSE(tier->Read(a.meta.hash, kModel).has_value());
  EXPECT_FALSE(fs::exists(PathOf(dir.path(), a.meta.hash)));
  EXPECT_EQ(tier->stats().corrupt_removed, 1u);
  EXPECT_FALSE(tier->Read(a.meta.hash, kOtherModel).has_value());
}

TEST(SsdTierTest, BadFilesAreRemovedAtOpen) {
  TempDir dir;
  const TestBlock a = MakeBlock(1), b = MakeBlock(2), c = MakeBlock(3);
  {
    auto tier = OpenTier(dir.path(), 64 * kFile);
    ASSERT_NE(tier, nullptr);
    for (const TestBlock* x : {&a, &b, &c}) ASSERT_TRUE(Write(*tier, *x));
  }
  fs::resize_file(PathOf(dir.path(), b.meta.hash), kFile - 1);                 // truncated
  std::string noise(kFile, '\0');
  uint64_t state = 5;
  for (char& ch : noise) ch = static_cast<char>(SplitMix(state));
  WriteFile(PathOf(dir.path(), MakeHash(10)), noise);                            // foreign bytes
  CopyFile(PathOf(dir.path(), a.meta.hash), PathOf(dir.path(), MakeHash(11)));  // valid file, wrong name
  const std::string temp = PathOf(dir.path(), MakeHash(12)) + ".tmp-1-0";
  WriteFile(temp, "partial");                                                    // stray temp file
  const std::string hex13 = ToHex(MakeHash(13));
  const std::string wrong_shard = dir.path() + "/" + (hex13[0] == '0' ? "11" : "00") + "/" + hex13 + ".kvb";
  CopyFile(PathOf(dir.path(), c.meta.hash), wrong_shard);  // a valid file in the wrong subdirectory
  WriteFile(dir.path() + "/README", "not ours");                                 // other names are left alone
  WriteFile(dir.path() + "/" + ToHex(a.meta.hash).substr(0, 2) + "/notes.txt", "not ours");

  auto tier = OpenTier(dir.path(), 64 * kFile);
  ASSERT_NE(tier, nullptr);
  const SsdTierStats s = tier->stats();
  EXPECT_EQ(s.corrupt_removed, 5u);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.bytes, 2 * kFile);
  EXPECT_FALSE(tier->Contains(b.meta.hash));
  for (uint64_t id : {10, 11, 12, 13}) EXPECT_FALSE(tier->Contains(MakeHash(id))) << id;
  EXPECT_EQ(CountFiles(dir.path(), ".tmp-"), 0u);
  EXPECT_FALSE(fs::exists(wrong_shard));
  EXPECT_TRUE(fs::exists(dir.path() + "/README"));
  EXPECT_TRUE(fs::exists(dir.path() + "/" + ToHex(a.meta.hash).substr(0, 2) + "/notes.txt"));
  EXPECT_TRUE(SameBytes(tier->Read(a.meta.hash, kModel), a));
  EXPECT_TRUE(SameBytes(tier->Read(c.meta.hash, kModel), c));
  EXPECT_EQ(DiskBytes(dir.path()), 2 * kFile + 2 * std::string("not ours").size());
}

// Unmounts (lazily) what was mounted at `path` when it goes out of scope.
struct MountGuard {
  std::string path;
  ~MountGuard() { umount2(path.c_str(), MNT_DETACH); }
};

void ExpectStoppedButServing(SsdTier& tier, const TestBlock& earlier, uint64_t next_id) {
  SsdTierStats s = tier.stats();
  EXPECT_GE(s.write_errors, 1u);
  EXPECT_TRUE(s.writes_stopped);
  const TestBlock next = MakeBlock(next_id);
  EXPECT_FALSE(tier.Enqueue(next.meta, next.bytes));
  EXPECT_EQ(tier.stats().dropped, s.dropped + 1);
  EXPECT_TRUE(SameBytes(tier.Read(earlier.meta.hash, kModel), earlier));
  EXPECT_EQ(CountFiles(tier.dir(), ".tmp-"), 0u);
}

TEST(SsdTierTest, FullDiskStopsWritesAndKeepsServing) {
  TempDir dir;
  fs::create_directories(dir.path());
  if (mount("tmpfs", dir.path().c_str(), "tmpfs", 0, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs: " << std::strerror(errno);
  }
  MountGuard guard{dir.path()};
  constexpr size_t kBig = 200 * 1024;
  constexpr auto kRetry = 300ms;
  auto tier = OpenTier(dir.path(), 64 << 20, 64, kRetry);  // the cap is far above the file system's size
  ASSERT_NE(tier, nullptr);
  const TestBlock first = MakeBlock(1, kBig);
  ASSERT_TRUE(Write(*tier, first));
  uint64_t id = 2;
  while (tier->stats().write_errors == 0 && id < 20) Write(*tier, MakeBlock(id++, kBig));
  ExpectStoppedButServing(*tier, first, 100);

  // Once space is back, the retry after the interval succeeds and writes resume.
  EXPECT_GE(tier->Clear().files_deleted, 1u);
  std::this_thread::sleep_for(kRetry + 100ms);
  const TestBlock later = MakeBlock(101, kBig);
  ASSERT_TRUE(Write(*tier, later));
  EXPECT_FALSE(tier->stats().writes_stopped);
  EXPECT_TRUE(SameBytes(tier->Read(later.meta.hash, kModel), later));
}

TEST(SsdTierTest, FileSizeLimitIsAWriteError) {
  TempDir dir;
  auto tier = OpenTier(dir.path(), 64 << 20);
  ASSERT_NE(tier, nullptr);
  const TestBlock small = MakeBlock(1);
  ASSERT_TRUE(Write(*tier, small));

  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit limited = saved;
  limited.rlim_cur = 1 << 20;
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  const TestBlock big = MakeBlock(2, 2 << 20);
  const bool queued = tier->Enqueue(big.meta, big.bytes);
  const bool flushed = tier->Flush(Clock::now() + kWait);
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_TRUE(queued);
  EXPECT_TRUE(flushed);
  EXPECT_FALSE(tier->Contains(big.meta.hash));
  ExpectStoppedButServing(*tier, small, 3);
}

TEST(SsdTierTest, FullQueueDropsAndEnqueueUntilWaits) {
  TempDir dir;
  auto tier = OpenTier(dir.path(), uint64_t{1} << 30, /*queue_capacity=*/1);
  ASSERT_NE(tier, nullptr);
  constexpr int kBlocks = 16;
  const TestBlock big = MakeBlock(1, 2 << 20);  // one buffer, shared by every block below
  int refused = 0;
  for (int i = 0; i < kBlocks; ++i) {
    refused += tier->Enqueue(BlockMeta{MakeHash(100 + i), kModel, 1, 1}, big.bytes) ? 0 : 1;
  }
  EXPECT_GE(refused, 1);  // the writer cannot write 2 MB as fast as a queue of one fills
  EXPECT_EQ(tier->stats().dropped, static_cast<uint64_t>(refused));
  for (int i = 0; i < kBlocks; ++i) {
    EXPECT_TRUE(tier->EnqueueUntil(BlockMeta{MakeHash(200 + i), kModel, 1, 1}, big.bytes, Clock::now() + kWait));
  }
  ASSERT_TRUE(tier->Flush(Clock::now() + kWait));
  const SsdTierStats s = tier->stats();
  EXPECT_EQ(s.writes, static_cast<uint64_t>(2 * kBlocks - refused));
  EXPECT_EQ(s.dropped, static_cast<uint64_t>(refused));
  EXPECT_EQ(s.queue_depth, 0u);
}

TEST(SsdTierTest, ClearDeletesEverything) {
  TempDir dir;
  auto tier = OpenTier(dir.path(), 64 * kFile);
  ASSERT_NE(tier, nullptr);
  for (uint64_t id = 1; id <= 5; ++id) ASSERT_TRUE(Write(*tier, MakeBlock(id)));
  for (uint64_t id = 6; id <= 10; ++id) tier->Enqueue(MakeBlock(id).meta, MakeBlock(id).bytes);
  const SsdClearResult r = tier->Clear();
  EXPECT_GE(r.files_deleted, 5u);
  EXPECT_EQ(r.bytes_deleted, r.files_deleted * kFile);
  SsdTierStats s = tier->stats();
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.bytes, 0u);
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_EQ(DiskBytes(dir.path()), 0u);
  for (uint64_t id = 1; id <= 10; ++id) EXPECT_FALSE(tier->Contains(MakeHash(id))) << id;

  const TestBlock a = MakeBlock(1);
  ASSERT_TRUE(Write(*tier, a));
  EXPECT_TRUE(SameBytes(tier->Read(a.meta.hash, kModel), a));
  EXPECT_EQ(tier->Clear().files_deleted, 1u);
  EXPECT_EQ(tier->Clear().files_deleted, 0u);
}

TEST(SsdTierTest, DestructorWritesWhatIsQueued) {
  TempDir dir;
  {
    auto tier = OpenTier(dir.path(), 64 * kFile);
    ASSERT_NE(tier, nullptr);
    for (uint64_t id = 1; id <= 10; ++id) ASSERT_TRUE(tier->Enqueue(MakeBlock(id).meta, MakeBlock(id).bytes));
  }
  auto tier = OpenTier(dir.path(), 64 * kFile);
  ASSERT_NE(tier, nullptr);
  EXPECT_EQ(tier->stats().entries, 10u);
  for (uint64_t id = 1; id <= 10; ++id) EXPECT_TRUE(SameBytes(tier->Read(MakeHash(id), kModel), MakeBlock(id)));
}

TEST(SsdTierTest, OffTierStoresNothing) {
  TempDir dir;
  auto tier = OpenTier(dir.path(), 0);
  ASSERT_NE(tier, nullptr);
  const TestBlock a = MakeBlock(1);
  EXPECT_FALSE(tier->Enqueue(a.meta, a.bytes));
  EXPECT_TRUE(tier->Flush(Clock::now()));
  EXPECT_FALSE(tier->Read(a.meta.hash, kModel).has_value());
  EXPECT_EQ(tier->Clear().files_deleted, 0u);
  EXPECT_FALSE(fs::exists(dir.path()));
}

TEST(SsdTierTest, OpenFailsWhenTheDirectoryCannotBeCreated) {
  TempDir dir;
  WriteFile(dir.path() + "/file", "x");
  std::string error;
  EXPECT_EQ(SsdTier::Open(SsdTierOptions{dir.path() + "/file/kv", 64 * kFile}, &error), nullptr);
  EXPECT_NE(error, "");
}

TEST(SsdTierTest, ConcurrentReadsAndWritesWhileEvicting) {
  TempDir dir;
  constexpr int kThreads = 4;
  constexpr int kBlocks = 32;
  constexpr size_t kSize = 16 * 1024;
  const uint64_t cap = 8 * (kSsdHeaderSize + kSize);
  auto tier = OpenTier(dir.path(), cap, 8);
  ASSERT_NE(tier, nullptr);
  std::vector<TestBlock> blocks;
  for (int i = 0; i < kBlocks; ++i) blocks.push_back(MakeBlock(500 + i, kSize));

  std::atomic<int> wrong{0}, hits{0};
  std::vector<std::thread> threads;
  const auto end = Clock::now() + 1s;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int n = 0; Clock::now() < end; ++n) {
        const TestBlock& b = blocks[rng() % kBlocks];
        switch (rng() % 8) {
          case 0: tier->Contains(b.meta.hash); tier->stats(); break;
          case 1: if (t == 0 && n % 50 == 0) tier->Clear(); break;
          case 2: case 3: case 4: tier->Enqueue(b.meta, b.bytes); break;
          default:
            if (auto got = tier->Read(b.meta.hash, kModel)) {
              ++hits;
              if (!SameBytes(got, b)) ++wrong;
            }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  ASSERT_TRUE(tier->Flush(Clock::now() + kWait));
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(hits.load(), 0);
  const SsdTierStats s = tier->stats();
  EXPECT_GT(s.evictions, 0u);
  EXPECT_EQ(s.corrupt_removed, 0u);
  EXPECT_EQ(s.write_errors, 0u);
  EXPECT_LE(s.bytes, cap);
  EXPECT_EQ(s.bytes, s.entries * (kSsdHeaderSize + kSize));
  EXPECT_EQ(DiskBytes(dir.path()), s.bytes);
}

}  // namespace
}  // namespace llmux::kv
