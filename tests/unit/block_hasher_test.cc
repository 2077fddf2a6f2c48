#include "kvcache/block_hasher.h"
#include "runtime/model_fingerprint.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace llmux::kv {
namespace {
namespace fs = std::filesystem;

constexpr std::string_view kFormat = "k=f16 v=f16 fa=auto unified=1";

std::string ModelPath(const std::string& file) {
  const char* dir = std::getenv("LLMUX_MODEL_DIR");
  return std::string(dir != nullptr ? dir : LLMUX_DEFAULT_MODEL_DIR) + "/" + file;
}

// llmux-make-model: $LLMUX_MAKE_MODEL, else next to this test binary in the build tree.
std::string MakeModelTool() {
  if (const char* tool = std::getenv("LLMUX_MAKE_MODEL")) return tool;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path().parent_path() / "tools/make_model/llmux-make-model").string();
}

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() / ("llmux-hasher-test-" + std::to_string(::getpid()) + "-" +
                                         std::to_string(counter++) + "-" + std::to_string(std::random_device{}()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

Hash Fingerprint(const std::string& path, std::string_view format = kFormat) {
  Hash h{};
  std::string error;
  EXPECT_TRUE(runtime::ModelFingerprint(path, format, &h, &error)) << error;
  return h;
}

Hash Model(uint8_t seed) {
  Hash h{};
  h.fill(seed);
  return h;
}

std::vector<int32_t> Tokens(size_t n, int32_t first = 1) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(BlockHasherTest, DeterministicAndChained) {
  const BlockHasher hasher(Model(1), 4);
  EXPECT_EQ(hasher.block_size(), 4);
  const auto tokens = Tokens(12);
  const auto hashes = hasher.FullBlocks(tokens);
  ASSERT_EQ(hashes.size(), 3u);
  EXPECT_EQ(hashes, BlockHasher(Model(1), 4).FullBlocks(tokens));
  EXPECT_NE(hashes[0], hashes[1]);
  EXPECT_NE(hashes[1], hashes[2]);
  // Next continues the chain from a zero parent.
  const std::span<const int32_t> all(tokens);
  EXPECT_EQ(hasher.Next(Hash{}, all.subspan(0, 4)), hashes[0]);
  EXPECT_EQ(hasher.Next(hashes[0], all.subspan(4, 4)), hashes[1]);
  EXPECT_EQ(hasher.Next(hashes[1], all.subspan(8, 4)), hashes[2]);
}

TEST(BlockHasherTest, SameTokensAtAnotherPositionHashDifferently) {
  const BlockHasher hasher(Model(1), 2);
  const std::vector<int32_t> tokens = {7, 7, 7, 7};
  const auto hashes = hasher.FullBlocks(tokens);
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_NE(hashes[0], hashes[1]);
}

TEST(BlockHasherTest, DifferentModelsNeverShareBlocks) {
  const auto tokens = Tokens(16);
  const auto a = BlockHasher(Model(1), 4).FullBlocks(tokens);
  const auto b = BlockHasher(Model(2), 4).FullBlocks(tokens);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NE(a[i], b[i]) << i;
}

TEST(BlockHasherTest, ChangedTokenChangesItsBlockAndEveryLaterOne) {
  const BlockHasher hasher(Model(3), 8);
  auto tokens = Tokens(40);
  const auto before = hasher.FullBlocks(tokens);
  tokens[17] += 1;  // block 2
  const auto after = hasher.FullBlocks(tokens);
  ASSERT_EQ(before.size(), 5u);
  ASSERT_EQ(after.size(), 5u);
  EXPECT_EQ(before[0], after[0]);
  EXPECT_EQ(before[1], after[1]);
  for (size_t i = 2; i < 5; ++i) EXPECT_NE(before[i], after[i]) << i;
}

TEST(BlockHasherTest, PrefixHashesArePrefixOfLongerSequence) {
  const BlockHasher hasher(Model(4), 16);
  const auto tokens = Tokens(16 * 10);
  const auto full = hasher.FullBlocks(tokens);
  for (size_t blocks = 0; blocks <= 10; ++blocks) {
    const auto prefix = hasher.FullBlocks(std::span<const int32_t>(tokens).first(blocks * 16));
    ASSERT_EQ(prefix.size(), blocks);
    EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), full.begin()));
  }
}

TEST(BlockHasherTest, PartialLastBlockIgnored) {
  const BlockHasher hasher(Model(5), 256);
  EXPECT_TRUE(hasher.FullBlocks(Tokens(255)).empty());
  const auto tokens = Tokens(256 * 2 + 100);
  const auto hashes = hasher.FullBlocks(tokens);
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(hashes, hasher.FullBlocks(std::span<const int32_t>(tokens).first(512)));
}

TEST(ModelFingerprintTest, StableAcrossCalls) {
  EXPECT_EQ(Fingerprint(ModelPath("tiny.gguf")), Fingerprint(ModelPath("tiny.gguf")));
}

TEST(ModelFingerprintTest, DiffersBetweenModels) {
  EXPECT_NE(Fingerprint(ModelPath("tiny.gguf")), Fingerprint(ModelPath("tiny-qwen2.gguf")));
}

TEST(ModelFingerprintTest, DiffersWithKvFormat) {
  const std::string path = ModelPath("tiny.gguf");
  EXPECT_NE(Fingerprint(path, "k=f16 v=f16 fa=auto unified=1"), Fingerprint(path, "k=q8_0 v=q8_0 fa=on unified=1"));
  EXPECT_NE(Fingerprint(path, ""), Fingerprint(path, "fa=off"));
}

TEST(ModelFingerprintTest, IndependentOfPath) {
  TempDir dir;
  const fs::path copy = dir / "renamed-copy.gguf";
  fs::copy_file(ModelPath("tiny.gguf"), copy);
  EXPECT_EQ(Fingerprint(ModelPath("tiny.gguf")), Fingerprint(copy.string()));
}

TEST(ModelFingerprintTest, SameShapesAndVocabularyOtherWeightsDiffer) {
  const std::string tool = MakeModelTool();
  if (!fs::exists(tool)) GTEST_SKIP() << "llmux-make-model not built at " << tool;
  TempDir dir;
  const fs::path a = dir / "seed42.gguf", b = dir / "seed43.gguf", c = dir / "seed42-again.gguf";
  for (const auto& [out, seed] : {std::pair{a, 42}, std::pair{b, 43}, std::pair{c, 42}}) {
    const std::string cmd = "'" + tool + "' --preset tiny --seed " + std::to_string(seed) + " --out '" +
                            out.string() + "' >/dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  EXPECT_NE(Fingerprint(a.string()), Fingerprint(b.string()));
  EXPECT_EQ(Fingerprint(a.string()), Fingerprint(c.string()));
}

TEST(ModelFingerprintTest, NotAGgufFails) {
  TempDir dir;
  const fs::path junk = dir / "junk.gguf";
  std::ofstream(junk, std::ios::binary) << std::string(4096, 'x');
  Hash h{};
  std::string error;
  EXPECT_FALSE(runtime::ModelFingerprint(junk.string(), kFormat, &h, &error));
  EXPECT_FALSE(error.empty());
  error.clear();
  EXPECT_FALSE(runtime::ModelFingerprint((dir / "missing.gguf").string(), kFormat, &h, &error));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace llmux::kv
