// ModelRegistry: the models this server can serve, found at start-up from
// --model files and --model-dir directories, and how a requested name maps to
// one of them by id.
//
// Discovery does not open the files; a model is a file name that follows the
// rules below. In a --model-dir directory:
//   - every *.gguf directly in the directory and in each immediate
//     subdirectory (not deeper) is a candidate; symlinks to files count;
//   - entries whose name starts with '.' are ignored;
//   - files whose name starts with "mmproj" (any case) are multimodal
//     projectors, not models, and are skipped;
//   - a split set <prefix>-NNNNN-of-MMMMM.gguf (5 digits each, 1-based) is one
//     model with id <prefix>. Its shards must sit in one directory. A set with
//     missing shards is skipped with a warning that names them. Non-first
//     shards never become models of their own;
//   - any other *.gguf is one model whose id is the file name without ".gguf".
// Ids are unique. On a duplicate the first one wins and a warning names both
// paths: the earlier --model/--model-dir, or within one directory the first in
// (id, top level before subdirectory, path) order.
//
// Models are listed in the order they were added; the models of one directory
// in byte-wise id order.
//
// Only `path` is loaded: llama.cpp finds the other shards of a split model by
// the naming convention.
//
// Thread-safety: filled before the server starts; afterwards only const
// methods are called, from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmux {

struct ModelEntry {
  std::string id;                   // file stem, split suffix removed
  std::string path;                 // absolute path of the GGUF to load (first shard of a split model)
  std::vector<std::string> shards;  // every file of the model in order (1 for an unsplit model)
  uint64_t file_bytes = 0;          // sum over shards
  std::string source;               // the --model-dir it came from, or "" for --model
};

class ModelRegistry {
 public:
  // Adds one GGUF file (--model). The first shard of a split model may be
  // given; its sibling shards are grouped with it. Fails when `path` is not a
  // readable regular file, is an mmproj file, is a non-first shard, or is a
  // first shard whose set is incomplete. A duplicate id is a warning (the
  // model already added wins) and returns true.
  bool AddFile(const std::string& path, std::string* error);
  // Adds the models found in `dir` (see the rules above). Fails when `dir` is
  // not a readable directory; an empty directory is not an error, and an
  // unreadable subdirectory is a warning.
  bool AddDirectory(const std::string& dir, std::string* error);

  const std::vector<ModelEntry>& models() const { return models_; }
  // Exact id first, then an ASCII case-insensitive match (the first added
  // wins). nullptr when unknown.
  const ModelEntry* Find(std::string_view name) const;
  // "a, b, c": for error messages.
  std::string IdList() const;

 private:
  // Appends `entry` unless its id is taken (then warns and drops it).
  void Insert(ModelEntry entry);

  std::vector<ModelEntry> models_;
};

}  // namespace llmux
