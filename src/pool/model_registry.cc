#include "pool/model_registry.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include <spdlog/spdlog.h>

namespace llmux {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kGgufExtension = ".gguf";

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && EqualsIgnoreCase(s.substr(0, prefix.size()), prefix);
}

bool IsMmproj(std::string_view file_name) { return StartsWithIgnoreCase(file_name, "mmproj"); }

bool IsGguf(std::string_view file_name) {
  return file_name.size() > kGgufExtension.size() && file_name.ends_with(kGgufExtension);
}

// A file name of the form <prefix>-NNNNN-of-MMMMM.gguf.
struct ShardName {
  std::string prefix;
  int index = 0;  // 1-based
  int count = 0;
};

bool ParseFiveDigits(std::string_view s, int* out) {
  if (s.size() != 5) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// nullopt when `file_name` does not have the split suffix. A suffix with
// impossible numbers (0, or index > count) also yields nullopt with
// *malformed set, so the caller can skip the file rather than serve a shard.
std::optional<ShardName> ParseShardName(std::string_view file_name, bool* malformed) {
  *malformed = false;
  // "-00001-of-00003.gguf" is 20 characters; the prefix must not be empty.
  constexpr size_t kSuffix = 20;
  if (!IsGguf(file_name) || file_name.size() <= kSuffix) return std::nullopt;
  const std::string_view suffix = file_name.substr(file_name.size() - kSuffix);
  if (suffix[0] != '-' || suffix.substr(6, 4) != "-of-") return std::nullopt;
  ShardName shard;
  if (!ParseFiveDigits(suffix.substr(1, 5), &shard.index) || !ParseFiveDigits(suffix.substr(10, 5), &shard.count)) {
    return std::nullopt;
  }
  if (shard.index < 1 || shard.count < 1 || shard.index > shard.count) {
    *malformed = true;
    return std::nullopt;
  }
  shard.prefix = std::string(file_name.substr(0, file_name.size() - kSuffix));
  return shard;
}

std::string ShardFileName(const std::string& prefix, int index, int count) {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), "-%05d-of-%05d.gguf", index, count);
  return prefix + suffix;
}

std::string AbsolutePath(const fs::path& p) {
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec);
  if (ec) abs = p;
  return abs.lexically_normal().string();
}

uint64_t FileBytes(const fs::path& p) {
  std::error_code ec;
  const uintmax_t n = fs::file_size(p, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

bool IsRegularFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);  // follows symlinks
}

// Builds the entry for the split set `shard` whose files are in `dir`.
// Returns false and the missing file names when the set is incomplete.
bool BuildSplitEntry(const fs::path& dir, const ShardName& shard, ModelEntry* entry, std::vector<std::string>* missing) {
  entry->id = shard.prefix;
  for (int i = 1; i <= shard.count; ++i) {
    const std::string name = ShardFileName(shard.prefix, i, shard.count);
    const fs::path p = dir / name;
    if (!IsRegularFile(p)) {
      missing->push_back(name);
      continue;
    }
    entry->shards.push_back(AbsolutePath(p));
    entry->file_bytes += FileBytes(p);
  }
  if (!missing->empty()) return false;
  entry->path = entry->shards.front();
  return true;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// One model found while scanning a directory, before duplicates are removed.
struct Candidate {
  ModelEntry entry;
  int depth = 0;  // 0: directly in the --model-dir, 1: in a subdirectory
};

// Adds the *.gguf files directly in `dir` to `candidates`. Returns false when
// `dir` cannot be listed (*error says why).
bool ScanOneDirectory(const fs::path& dir, int depth, const std::string& source, std::vector<Candidate>* candidates,
                      std::vector<fs::path>* subdirs, std::string* error) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  // Split sets in this directory, keyed by (prefix, count).
  std::map<std::pair<std::string, int>, ShardName> split_sets;
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::directory_entry& e = *it;
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code type_ec;
    if (subdirs != nullptr && e.is_directory(type_ec)) {
      subdirs->push_back(e.path());
      continue;
    }
    if (!IsGguf(name) || !e.is_regular_file(type_ec)) continue;
    if (IsMmproj(name)) {
      spdlog::debug("skipping multimodal projector {}", e.path().string());
      continue;
    }
    bool malformed = false;
    std::optional<ShardName> shard = ParseShardName(name, &malformed);
    if (malformed) {
      spdlog::warn("skipping {}: its split suffix has an impossible shard number", e.path().string());
      continue;
    }
    if (shard) {
      split_sets.emplace(std::make_pair(shard->prefix, shard->count), *shard);
      continue;
    }
    Candidate c;
    c.depth = depth;
    c.entry.id = name.substr(0, name.size() - kGgufExtension.size());
    c.entry.path = AbsolutePath(e.path());
    c.entry.shards = {c.entry.path};
    c.entry.file_bytes = FileBytes(e.path());
    c.entry.source = source;
    candidates->push_back(std::move(c));
  }
  if (ec) {
    *error = "cannot list model directory '" + dir.string() + "': " + ec.message();
    return false;
  }
  for (const auto& [key, shard] : split_sets) {
    Candidate c;
    c.depth = depth;
    c.entry.source = source;
    std::vector<std::string> missing;
    if (!BuildSplitEntry(dir, shard, &c.entry, &missing)) {
      spdlog::warn("skipping split model '{}' in {}: missing {}", shard.prefix, dir.string(), JoinNames(missing));
      continue;
    }
    candidates->push_back(std::move(c));
  }
  return true;
}

}  // namespace

void ModelRegistry::Insert(ModelEntry entry) {
  for (const ModelEntry& e : models_) {
    if (e.id == entry.id) {
      spdlog::warn("model id '{}' is already taken by {}; ignoring {}", e.id, e.path, entry.path);
      return;
    }
  }
  models_.push_back(std::move(entry));
}

bool ModelRegistry::AddFile(const std::string& path, std::string* error) {
  const fs::path p(path);
  if (!IsRegularFile(p)) {
    *error = "model file '" + path + "' does not exist or is not a regular file";
    return false;
  }
  const std::string name = p.filename().string();
  if (IsMmproj(name)) {
    *error = "model file '" + path + "' is a multimodal projector (mmproj), not a model";
    return false;
  }
  ModelEntry entry;
  bool malformed = false;
  std::optional<ShardName> shard = ParseShardName(name, &malformed);
  if (malformed) {
    *error = "model file '" + path + "' has a split suffix with an impossible shard number";
    return false;
  }
  if (shard) {
    if (shard->index != 1) {
      *error = "model file '" + path + "' is shard " + std::to_string(shard->index) + " of " +
               std::to_string(shard->count) + "; give the first shard, " +
               ShardFileName(shard->prefix, 1, shard->count);
      return false;
    }
    std::vector<std::string> missing;
    if (!BuildSplitEntry(p.parent_path().empty() ? fs::path(".") : p.parent_path(), *shard, &entry, &missing)) {
      *error = "split model '" + path + "' is incomplete: missing " + JoinNames(missing);
      return false;
    }
  } else {
    const std::string stem = p.stem().string();
    entry.id = stem.empty() ? name : stem;
    entry.path = AbsolutePath(p);
    entry.shards = {entry.path};
    entry.file_bytes = FileBytes(p);
  }
  Insert(std::move(entry));
  return true;
}

bool ModelRegistry::AddDirectory(const std::string& dir, std::string* error) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    *error = "model directory '" + dir + "' does not exist or is not a directory";
    return false;
  }
  std::vector<Candidate> candidates;
  std::vector<fs::path> subdirs;
  if (!ScanOneDirectory(dir, 0, dir, &candidates, &subdirs, error)) return false;
  for (const fs::path& sub : subdirs) {
    std::string sub_error;
    if (!ScanOneDirectory(sub, 1, dir, &candidates, nullptr, &sub_error)) spdlog::warn("{}; skipping it", sub_error);
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.entry.id, a.depth, a.entry.path) < std::tie(b.entry.id, b.depth, b.entry.path);
  });
  for (Candidate& c : candidates) Insert(std::move(c.entry));
  return true;
}

const ModelEntry* ModelRegistry::Find(std::string_view name) const {
  for (const ModelEntry& e : models_) {
    if (e.id == name) return &e;
  }
  for (const ModelEntry& e : models_) {
    if (EqualsIgnoreCase(e.id, name)) return &e;
  }
  return nullptr;
}

std::string ModelRegistry::IdList() const {
  std::string out;
  for (const ModelEntry& e : models_) {
    if (!out.empty()) out += ", ";
    out += e.id;
  }
  return out;
}

}  // namespace llmux
