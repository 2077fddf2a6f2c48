#include "pool/model_registry.h"

#include <algorithm>
#include <filesystem>
#include <strings.h>

#include <spdlog/spdlog.h>

namespace llmux {
namespace fs = std::filesystem;

bool ModelRegistry::AddFile(const std::string& path, std::string* error) {
  std::error_code ec;
  const fs::path p = fs::absolute(path, ec);
  if (ec || !fs::is_regular_file(p, ec)) {
    *error = "model file '" + path + "' does not exist or is not a regular file";
    return false;
  }
  ModelEntry e;
  e.id = p.stem().string();
  e.path = p.string();
  e.file_bytes = fs::file_size(p, ec);
  if (Resolve(e.id) != nullptr && Resolve(e.id)->id == e.id) {
    spdlog::warn("model id '{}' is already taken; ignoring {}", e.id, e.path);
    return true;
  }
  models_.push_back(std::move(e));
  return true;
}

bool ModelRegistry::AddDirectory(const std::string& dir, std::string* error) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    *error = "model directory '" + dir + "' does not exist or is not a directory";
    return false;
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".gguf") files.push_back(entry.path());
  }
  if (ec) {
    *error = "cannot list model directory '" + dir + "': " + ec.message();
    return false;
  }
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) { return a.stem() < b.stem(); });
  for (const fs::path& f : files) {
    if (!AddFile(f.string(), error)) return false;
  }
  return true;
}

const ModelEntry* ModelRegistry::Resolve(std::string_view name) const {
  for (const ModelEntry& e : models_) {
    if (e.id == name) return &e;
  }
  for (const ModelEntry& e : models_) {
    if (e.id.size() == name.size() && strncasecmp(e.id.data(), name.data(), name.size()) == 0) return &e;
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
