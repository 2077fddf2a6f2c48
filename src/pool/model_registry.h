// ModelRegistry: the models this server can serve, found at start-up, and
// how a requested name maps to one of them.
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
  std::string id;    // the file name without ".gguf"
  std::string path;  // absolute path of the GGUF
  uint64_t file_bytes = 0;
};

class ModelRegistry {
 public:
  // Adds one GGUF file. Fails when it is not a readable regular file.
  bool AddFile(const std::string& path, std::string* error);
  // Adds every *.gguf file directly in `dir`, in id order. Fails when
  // `dir` is not a readable directory; an empty directory is not an error.
  bool AddDirectory(const std::string& dir, std::string* error);

  const std::vector<ModelEntry>& models() const { return models_; }
  // Exact id first, then a case-insensitive match. nullptr when unknown.
  const ModelEntry* Resolve(std::string_view name) const;
  // "a, b, c": for error messages.
  std::string IdList() const;

 private:
  std::vector<ModelEntry> models_;
};

}  // namespace llmux
