#include "pool/model_registry.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace llmux {
namespace {
namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("llmux-registry-test-" + std::to_string(::getpid()) + "-" +
                                         std::to_string(counter++) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

// Creates `p` (and its parent directories) holding `bytes` bytes.
void Touch(const fs::path& p, size_t bytes = 0) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << std::string(bytes, 'x');
}

std::vector<std::string> Ids(const ModelRegistry& r) {
  std::vector<std::string> ids;
  for (const ModelEntry& e : r.models()) ids.push_back(e.id);
  return ids;
}

using Strings = std::vector<std::string>;

TEST(ModelRegistry, FlatDirectory) {
  TempDir dir;
  Touch(dir.path() / "b.gguf", 7);
  Touch(dir.path() / "a.gguf", 3);
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  ASSERT_EQ(Ids(r), (Strings{"a", "b"}));
  const ModelEntry& a = r.models()[0];
  EXPECT_EQ(a.path, (dir.path() / "a.gguf").string());
  EXPECT_TRUE(fs::path(a.path).is_absolute());
  EXPECT_EQ(a.shards, Strings{a.path});
  EXPECT_EQ(a.file_bytes, 3u);
  EXPECT_EQ(a.source, dir.str());
  EXPECT_EQ(r.models()[1].file_bytes, 7u);
  EXPECT_EQ(r.IdList(), "a, b");
}

TEST(ModelRegistry, OneLevelOfSubdirectoriesNotTwo) {
  TempDir dir;
  Touch(dir.path() / "top.gguf");
  Touch(dir.path() / "family" / "child.gguf");
  Touch(dir.path() / "family" / "deeper" / "grandchild.gguf");
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  EXPECT_EQ(Ids(r), (Strings{"child", "top"}));
  EXPECT_EQ(r.Find("child")->path, (dir.path() / "family" / "child.gguf").string());
  EXPECT_EQ(r.Find("child")->source, dir.str());
}

TEST(ModelRegistry, SplitSetIsOneModel) {
  TempDir dir;
  Touch(dir.path() / "big-00002-of-00003.gguf", 20);
  Touch(dir.path() / "big-00001-of-00003.gguf", 10);
  Touch(dir.path() / "big-00003-of-00003.gguf", 30);
  Touch(dir.path() / "sub" / "part-00001-of-00002.gguf", 1);
  Touch(dir.path() / "sub" / "part-00002-of-00002.gguf", 2);
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  ASSERT_EQ(Ids(r), (Strings{"big", "part"}));
  const ModelEntry& big = r.models()[0];
  EXPECT_EQ(big.path, (dir.path() / "big-00001-of-00003.gguf").string());
  EXPECT_EQ(big.shards, (Strings{(dir.path() / "big-00001-of-00003.gguf").string(),
                                 (dir.path() / "big-00002-of-00003.gguf").string(),
                                 (dir.path() / "big-00003-of-00003.gguf").string()}));
  EXPECT_EQ(big.file_bytes, 60u);
  const ModelEntry& part = r.models()[1];
  EXPECT_EQ(part.shards.size(), 2u);
  EXPECT_EQ(part.file_bytes, 3u);
}

TEST(ModelRegistry, SingleShardSplitSet) {
  TempDir dir;
  Touch(dir.path() / "solo-00001-of-00001.gguf", 5);
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  ASSERT_EQ(Ids(r), Strings{"solo"});
  EXPECT_EQ(r.models()[0].shards.size(), 1u);
}

TEST(ModelRegistry, IncompleteSplitSetSkipped) {
  TempDir dir;
  Touch(dir.path() / "gap-00001-of-00003.gguf");
  Touch(dir.path() / "gap-00003-of-00003.gguf");
  Touch(dir.path() / "nofirst-00002-of-00002.gguf");
  Touch(dir.path() / "ok.gguf");
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  // Neither the incomplete sets nor any of their shards become models.
  EXPECT_EQ(Ids(r), Strings{"ok"});
}

TEST(ModelRegistry, NotSplitSuffixesArePlainModels) {
  TempDir dir;
  Touch(dir.path() / "m-0001-of-0002.gguf");     // 4 digits: not a split name
  Touch(dir.path() / "m-00001-00002.gguf");      // no "-of-"
  Touch(dir.path() / "bad-00000-of-00002.gguf");  // impossible shard number: skipped
  Touch(dir.path() / "bad-00003-of-00002.gguf");
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  EXPECT_EQ(Ids(r), (Strings{"m-00001-00002", "m-0001-of-0002"}));
}

TEST(ModelRegistry, MmprojSkipped) {
  TempDir dir;
  Touch(dir.path() / "model.gguf");
  Touch(dir.path() / "mmproj-model-f16.gguf");
  Touch(dir.path() / "MMPROJ-x.gguf");
  Touch(dir.path() / "vision" / "mmproj.gguf");
  Touch(dir.path() / "vision" / "vision.gguf");
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  EXPECT_EQ(Ids(r), (Strings{"model", "vision"}));
}

TEST(ModelRegistry, NonGgufIgnored) {
  TempDir dir;
  Touch(dir.path() / "model.gguf");
  Touch(dir.path() / "README.md");
  Touch(dir.path() / "model.gguf.part");
  Touch(dir.path() / "weights.bin");
  Touch(dir.path() / ".gguf");
  fs::create_directories(dir.path() / "dir.gguf");  // a directory, scanned as a subdirectory
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  EXPECT_EQ(Ids(r), Strings{"model"});
}

TEST(ModelRegistry, HiddenEntriesIgnored) {
  TempDir dir;
  Touch(dir.path() / "visible.gguf");
  Touch(dir.path() / ".hidden.gguf");
  Touch(dir.path() / ".cache" / "cached.gguf");
  Touch(dir.path() / "sub" / ".also-hidden.gguf");
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  EXPECT_EQ(Ids(r), Strings{"visible"});
}

TEST(ModelRegistry, SymlinkToFileCounts) {
  TempDir store;
  TempDir dir;
  Touch(store.path() / "blob", 11);
  fs::create_symlink(store.path() / "blob", dir.path() / "linked.gguf");
  fs::create_symlink(store.path() / "missing", dir.path() / "dangling.gguf");
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  ASSERT_EQ(Ids(r), Strings{"linked"});
  EXPECT_EQ(r.models()[0].path, (dir.path() / "linked.gguf").string());
  EXPECT_EQ(r.models()[0].file_bytes, 11u);
}

TEST(ModelRegistry, DuplicateAcrossDirectoriesFirstWins) {
  TempDir first;
  TempDir second;
  Touch(first.path() / "same.gguf", 1);
  Touch(second.path() / "same.gguf", 2);
  Touch(second.path() / "other.gguf", 3);
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddDirectory(first.str(), &error)) << error;
  ASSERT_TRUE(r.AddDirectory(second.str(), &error)) << error;
  ASSERT_EQ(Ids(r), (Strings{"same", "other"}));
  EXPECT_EQ(r.models()[0].path, (first.path() / "same.gguf").string());
  EXPECT_EQ(r.models()[0].source, first.str());
  EXPECT_EQ(r.models()[1].source, second.str());
}

TEST(ModelRegistry, DuplicateWithinDirectoryIsDeterministic) {
  TempDir dir;
  Touch(dir.path() / "zz" / "m.gguf");
  Touch(dir.path() / "aa" / "m.gguf");
  Touch(dir.path() / "aa" / "n.gguf");
  Touch(dir.path() / "bb" / "n.gguf");
  Touch(dir.path() / "m.gguf");
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  ASSERT_EQ(Ids(r), (Strings{"m", "n"}));
  // Top level beats a subdirectory; between subdirectories the smaller path wins.
  EXPECT_EQ(r.models()[0].path, (dir.path() / "m.gguf").string());
  EXPECT_EQ(r.models()[1].path, (dir.path() / "aa" / "n.gguf").string());
}

TEST(ModelRegistry, OrderIsAdditionOrderThenIdWithinDirectory) {
  TempDir dir;
  TempDir files;
  Touch(files.path() / "zeta.gguf");
  Touch(dir.path() / "c.gguf");
  Touch(dir.path() / "B.gguf");
  Touch(dir.path() / "a.gguf");
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddFile((files.path() / "zeta.gguf").string(), &error)) << error;
  ASSERT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  EXPECT_EQ(r.IdList(), "zeta, B, a, c");  // byte-wise id order within the directory
}

TEST(ModelRegistry, FindExactThenCaseInsensitive) {
  TempDir dir;
  Touch(dir.path() / "Qwen.gguf");
  Touch(dir.path() / "qwen.gguf");
  Touch(dir.path() / "Llama-3B.gguf");
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  ASSERT_NE(r.Find("qwen"), nullptr);
  EXPECT_EQ(r.Find("qwen")->id, "qwen");
  EXPECT_EQ(r.Find("Qwen")->id, "Qwen");
  EXPECT_EQ(r.Find("QWEN")->id, "Qwen");  // first in the list
  ASSERT_NE(r.Find("llama-3b"), nullptr);
  EXPECT_EQ(r.Find("llama-3b")->id, "Llama-3B");
  EXPECT_EQ(r.Find("llama"), nullptr);
  EXPECT_EQ(r.Find(""), nullptr);
}

TEST(ModelRegistry, MissingDirectoryFails) {
  TempDir dir;
  const std::string missing = (dir.path() / "nope").string();
  ModelRegistry r;
  std::string error;
  EXPECT_FALSE(r.AddDirectory(missing, &error));
  EXPECT_NE(error.find(missing), std::string::npos) << error;
  Touch(dir.path() / "file.gguf");
  error.clear();
  EXPECT_FALSE(r.AddDirectory((dir.path() / "file.gguf").string(), &error));
  EXPECT_FALSE(error.empty());
  EXPECT_TRUE(r.models().empty());
}

TEST(ModelRegistry, EmptyDirectoryIsFine) {
  TempDir dir;
  ModelRegistry r;
  std::string error;
  EXPECT_TRUE(r.AddDirectory(dir.str(), &error)) << error;
  EXPECT_TRUE(r.models().empty());
  EXPECT_EQ(r.IdList(), "");
}

TEST(ModelRegistry, AddFilePlain) {
  TempDir dir;
  Touch(dir.path() / "one.gguf", 4);
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddFile((dir.path() / "one.gguf").string(), &error)) << error;
  ASSERT_EQ(Ids(r), Strings{"one"});
  EXPECT_EQ(r.models()[0].source, "");
  EXPECT_EQ(r.models()[0].file_bytes, 4u);
  // The same id again: a warning, the first one stays.
  Touch(dir.path() / "sub" / "one.gguf", 9);
  EXPECT_TRUE(r.AddFile((dir.path() / "sub" / "one.gguf").string(), &error));
  ASSERT_EQ(r.models().size(), 1u);
  EXPECT_EQ(r.models()[0].file_bytes, 4u);
}

TEST(ModelRegistry, AddFileFirstShardGroupsSiblings) {
  TempDir dir;
  Touch(dir.path() / "big-00001-of-00002.gguf", 5);
  Touch(dir.path() / "big-00002-of-00002.gguf", 6);
  ModelRegistry r;
  std::string error;
  ASSERT_TRUE(r.AddFile((dir.path() / "big-00001-of-00002.gguf").string(), &error)) << error;
  ASSERT_EQ(Ids(r), Strings{"big"});
  EXPECT_EQ(r.models()[0].path, (dir.path() / "big-00001-of-00002.gguf").string());
  EXPECT_EQ(r.models()[0].shards.size(), 2u);
  EXPECT_EQ(r.models()[0].file_bytes, 11u);
}

TEST(ModelRegistry, AddFileRejects) {
  TempDir dir;
  Touch(dir.path() / "big-00001-of-00002.gguf");
  Touch(dir.path() / "big-00002-of-00002.gguf");
  Touch(dir.path() / "gap-00001-of-00002.gguf");
  Touch(dir.path() / "mmproj-x.gguf");
  ModelRegistry r;
  std::string error;
  EXPECT_FALSE(r.AddFile((dir.path() / "big-00002-of-00002.gguf").string(), &error));
  EXPECT_NE(error.find("big-00001-of-00002.gguf"), std::string::npos) << error;
  error.clear();
  EXPECT_FALSE(r.AddFile((dir.path() / "gap-00001-of-00002.gguf").string(), &error));
  EXPECT_NE(error.find("gap-00002-of-00002.gguf"), std::string::npos) << error;
  error.clear();
  EXPECT_FALSE(r.AddFile((dir.path() / "mmproj-x.gguf").string(), &error));
  EXPECT_FALSE(error.empty());
  error.clear();
  EXPECT_FALSE(r.AddFile((dir.path() / "missing.gguf").string(), &error));
  EXPECT_NE(error.find("missing.gguf"), std::string::npos) << error;
  EXPECT_FALSE(r.AddFile(dir.str(), &error));  // a directory
  EXPECT_TRUE(r.models().empty());
}

}  // namespace
}  // namespace llmux
