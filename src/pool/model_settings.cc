#include "pool/model_settings.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "pool/model_registry.h"

namespace llmux {
namespace fs = std::filesystem;

namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kAlias = "alias";
constexpr const char* kPinned = "pinned";
constexpr const char* kTtlSeconds = "ttl_seconds";
constexpr const char* kCtxSize = "ctx_size";

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

bool IsAliasChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == ':' || c == '/' || c == '-';
}

// An integer JSON value in [lo, hi]; floats (even 300.0) and other types are not.
bool IntegerIn(const Json& v, int64_t lo, int64_t hi, int32_t* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || static_cast<int64_t>(u) < lo) return false;
    *out = static_cast<int32_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) return false;
    *out = static_cast<int32_t>(i);
    return true;
  }
  return false;
}

// Applies one key of a settings object to `s`. A null value resets the field.
// Checks the value on its own; alias uniqueness is checked by the caller.
std::optional<SettingsError> ApplyField(const std::string& key, const Json& value, ModelSettings* s) {
  if (key == kAlias) {
    if (value.is_null()) {
      s->alias.reset();
      return std::nullopt;
    }
    if (!value.is_string()) return SettingsError{key, "alias must be a string or null"};
    const std::string& alias = value.get_ref<const std::string&>();
    if (alias.empty() || alias.size() > kMaxAliasLength) {
      return SettingsError{key, "alias must be 1 to " + std::to_string(kMaxAliasLength) + " characters long"};
    }
    for (char c : alias) {
      if (!IsAliasChar(c)) return SettingsError{key, "alias may only contain letters, digits and . _ : / -"};
    }
    s->alias = alias;
    return std::nullopt;
  }
  if (key == kPinned) {
    if (value.is_null()) {
      s->pinned = false;
      return std::nullopt;
    }
    if (!value.is_boolean()) return SettingsError{key, "pinned must be a boolean or null"};
    s->pinned = value.get<bool>();
    return std::nullopt;
  }
  if (key == kTtlSeconds) {
    if (value.is_null()) {
      s->ttl_seconds.reset();
      return std::nullopt;
    }
    int32_t v = 0;
    if (!IntegerIn(value, 0, kMaxTtlSeconds, &v)) {
      return SettingsError{key, "ttl_seconds must be an integer from 0 to " + std::to_string(kMaxTtlSeconds) + " or null"};
    }
    s->ttl_seconds = v;
    return std::nullopt;
  }
  if (key == kCtxSize) {
    if (value.is_null()) {
      s->ctx_size.reset();
      return std::nullopt;
    }
    int32_t v = 0;
    if (!IntegerIn(value, kMinCtxSize, kMaxCtxSize, &v)) {
      return SettingsError{key, "ctx_size must be an integer from " + std::to_string(kMinCtxSize) + " to " +
                                    std::to_string(kMaxCtxSize) + " or null"};
    }
    s->ctx_size = v;
    return std::nullopt;
  }
  return SettingsError{key, "unknown setting '" + key + "'; known: alias, pinned, ttl_seconds, ctx_size"};
}

std::string Serialize(const std::map<std::string, ModelSettings>& models) {
  Json entries = Json::object();
  for (const auto& [id, s] : models) {
    Json e = Json::object();
    if (s.alias) e[kAlias] = *s.alias;
    if (s.pinned) e[kPinned] = true;
    if (s.ttl_seconds) e[kTtlSeconds] = *s.ttl_seconds;
    if (s.ctx_size) e[kCtxSize] = *s.ctx_size;
    entries[id] = std::move(e);
  }
  Json root = Json::object();
  root["models"] = std::move(entries);
  return root.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

// Parses the file's text into `out`. false + *problem (without the file name).
bool ParseSettingsFile(const std::string& text, std::map<std::string, ModelSettings>* out, std::string* problem) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag.
    if (!what.empty() && what[0] == '[') {
      const size_t end = what.find("] ");
      if (end != std::string::npos) what = what.substr(end + 2);
    }
    *problem = "invalid JSON: " + what;
    return false;
  }
  if (!root.is_object()) {
    *problem = "the top level must be a JSON object";
    return false;
  }
  std::map<std::string, ModelSettings> models;
  for (const auto& [key, value] : root.items()) {
    if (key != "models") {
      *problem = "unknown top-level key '" + key + "'; expected only \"models\"";
      return false;
    }
    if (value.is_null()) continue;
    if (!value.is_object()) {
      *problem = "\"models\" must be an object keyed by model id";
      return false;
    }
    for (const auto& [id, fields] : value.items()) {
      if (id.empty()) {
        *problem = "models: a model id is empty";
        return false;
      }
      if (!fields.is_object()) {
        *problem = "models." + id + " must be an object";
        return false;
      }
      ModelSettings s;
      for (const auto& [field, v] : fields.items()) {
        if (std::optional<SettingsError> err = ApplyField(field, v, &s)) {
          *problem = "models." + id + "." + err->field + ": " + err->message;
          return false;
        }
      }
      if (s.alias) {
        for (const auto& [other_id, other] : models) {
          if (other.alias && EqualsIgnoreCase(*other.alias, *s.alias)) {
            *problem = "models." + id + ".alias: alias '" + *s.alias + "' is also the alias of '" + other_id + "'";
            return false;
          }
        }
      }
      models[id] = std::move(s);
    }
  }
  *out = std::move(models);
  return true;
}

std::string ErrnoText(int err) { return std::strerror(err); }

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

// Replaces `path` with `contents`: a temporary file in the same directory,
// fsync, rename, fsync of the directory. Creates missing parent directories.
// A symlink at `path` is followed, so the file it points to is replaced.
bool WriteFileAtomically(const std::string& path, const std::string& contents, std::string* error) {
  static std::atomic<uint64_t> counter{0};
  std::error_code ec;
  fs::path target(path);
  if (fs::is_symlink(target, ec)) {
    fs::path resolved = fs::weakly_canonical(target, ec);
    if (!ec) target = resolved;
  }
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  fs::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create directory '" + dir.string() + "': " + ec.message();
    return false;
  }
  const fs::path tmp = dir / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                              std::to_string(counter.fetch_add(1)));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    *error = "cannot create '" + tmp.string() + "': " + ErrnoText(errno);
    return false;
  }
  auto fail = [&](const std::string& what, int err) {
    *error = what + " '" + tmp.string() + "': " + ErrnoText(err);
    ::unlink(tmp.c_str());
    return false;
  };
  struct stat st;
  if (::stat(target.c_str(), &st) == 0) (void)::fchmod(fd, st.st_mode & 07777);  // keep the file's mode
  if (!WriteAll(fd, contents)) {
    const int err = errno;
    ::close(fd);
    return fail("cannot write", err);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return fail("cannot fsync", err);
  }
  if (::close(fd) != 0) return fail("cannot close", errno);
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    *error = "cannot rename '" + tmp.string() + "' to '" + target.string() + "': " + ErrnoText(err);
    ::unlink(tmp.c_str());
    return false;
  }
  // The new file is in place; a failed directory fsync only weakens durability.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0 || ::fsync(dir_fd) != 0) {
    spdlog::warn("settings: cannot fsync directory {}: {}", dir.string(), ErrnoText(errno));
  }
  if (dir_fd >= 0) ::close(dir_fd);
  return true;
}

}  // namespace

bool ModelSettingsStore::Open(const std::string& path, std::string* error) {
  std::map<std::string, ModelSettings> models;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec && status.type() != fs::file_type::not_found) {
    *error = "cannot read settings file '" + path + "': " + ec.message();
    return false;
  }
  if (status.type() != fs::file_type::not_found) {
    if (fs::is_directory(status)) {
      *error = "cannot read settings file '" + path + "': it is a directory";
      return false;
    }
    errno = 0;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      *error = "cannot read settings file '" + path + "': " + ErrnoText(errno ? errno : EIO);
      return false;
    }
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) {
      *error = "cannot read settings file '" + path + "': read error";
      return false;
    }
    std::string problem;
    if (!ParseSettingsFile(text.str(), &models, &problem)) {
      *error = "settings file '" + path + "': " + problem;
      return false;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  path_ = path;
  models_ = std::move(models);
  return true;
}

ModelSettings ModelSettingsStore::Get(std::string_view id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(std::string(id));
  return it == models_.end() ? ModelSettings{} : it->second;
}

std::map<std::string, ModelSettings> ModelSettingsStore::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  return models_;
}

std::variant<ModelSettings, SettingsError> ModelSettingsStore::Update(std::string_view id, const Json& patch,
                                                                      const ModelRegistry& registry) {
  std::lock_guard<std::mutex> lock(mu_);
  if (path_.empty()) return SettingsError{"", "no settings file is open"};
  if (id.empty()) return SettingsError{"", "the model id is empty"};
  if (!patch.is_object()) return SettingsError{"", "settings must be a JSON object"};
  const std::string key(id);
  ModelSettings next;
  if (auto it = models_.find(key); it != models_.end()) next = it->second;
  for (const auto& [field, value] : patch.items()) {
    if (std::optional<SettingsError> err = ApplyField(field, value, &next)) return std::move(*err);
  }
  if (patch.contains(kAlias) && next.alias) {
    const std::string& alias = *next.alias;
    for (const ModelEntry& m : registry.models()) {
      if (m.id != key && EqualsIgnoreCase(m.id, alias)) {
        return SettingsError{kAlias, "alias '" + alias + "' is the id of model '" + m.id + "'"};
      }
    }
    for (const auto& [other_id, other] : models_) {
      if (other_id != key && other.alias && EqualsIgnoreCase(*other.alias, alias)) {
        return SettingsError{kAlias, "alias '" + alias + "' is already the alias of model '" + other_id + "'"};
      }
    }
  }
  std::map<std::string, ModelSettings> models = models_;
  if (next == ModelSettings{}) {
    models.erase(key);
  } else {
    models[key] = next;
  }
  std::string write_error;
  if (!WriteFileAtomically(path_, Serialize(models), &write_error)) {
    return SettingsError{"", "cannot save settings file '" + path_ + "': " + write_error};
  }
  models_ = std::move(models);
  return next;
}

std::string ModelSettingsStore::IdForAlias(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, s] : models_) {
    if (s.alias && EqualsIgnoreCase(*s.alias, name)) return id;
  }
  return "";
}

std::string DefaultSettingsPath() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && xdg[0] != '\0') return (fs::path(xdg) / "llmux" / "models.json").string();
  std::string home;
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] != '\0') {
    home = h;
  } else {
    struct passwd pw;
    struct passwd* result = nullptr;
    std::vector<char> buf(16384);
    if (::getpwuid_r(::getuid(), &pw, buf.data(), buf.size(), &result) == 0 && result != nullptr &&
        result->pw_dir != nullptr) {
      home = result->pw_dir;
    }
  }
  if (home.empty()) return "";
  return (fs::path(home) / ".config" / "llmux" / "models.json").string();
}

}  // namespace llmux
