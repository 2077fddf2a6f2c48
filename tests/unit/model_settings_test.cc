#include "pool/model_settings.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "pool/model_registry.h"
#include "pool/model_resolver.h"

namespace llmux {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("llmux-settings-test-" + std::to_string(::getpid()) + "-" +
                                         std::to_string(counter++) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void WriteText(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << text;
}

std::string ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> DirNames(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A registry over empty *.gguf files named after `ids`, in `dir`/models.
ModelRegistry MakeRegistry(const fs::path& dir, const std::vector<std::string>& ids) {
  for (const std::string& id : ids) WriteText(dir / "models" / (id + ".gguf"), "");
  ModelRegistry r;
  std::string error;
  EXPECT_TRUE(r.AddDirectory((dir / "models").string(), &error)) << error;
  return r;
}

const ModelSettings* AsSettings(const std::variant<ModelSettings, SettingsError>& v) {
  return std::get_if<ModelSettings>(&v);
}
const SettingsError* AsError(const std::variant<ModelSettings, SettingsError>& v) {
  return std::get_if<SettingsError>(&v);
}

TEST(ModelSettings, MissingFileIsEmptyAndUpdateCreatesIt) {
  TempDir dir;
  const fs::path file = dir.path() / "nested" / "config" / "models.json";
  ModelRegistry registry = MakeRegistry(dir.path(), {"qwen"});
  ModelSettingsStore store;
  std::string error;
  ASSERT_TRUE(store.Open(file.string(), &error)) << error;
  EXPECT_EQ(store.path(), file.string());
  EXPECT_TRUE(store.All().empty());
  EXPECT_EQ(store.Get("qwen"), ModelSettings{});
  EXPECT_FALSE(fs::exists(file));

  auto result = store.Update("qwen", Json{{"pinned", true}}, registry);
  ASSERT_NE(AsSettings(result), nullptr) << AsError(result)->message;
  EXPECT_TRUE(AsSettings(result)->pinned);
  ASSERT_TRUE(fs::exists(file));
  EXPECT_TRUE(store.Get("qwen").pinned);
}

TEST(ModelSettings, FileFormatIsPrettyPrinted) {
  TempDir dir;
  const fs::path file = dir.path() / "models.json";
  ModelRegistry registry = MakeRegistry(dir.path(), {"qwen", "llama"});
  ModelSettingsStore store;
  std::string error;
  ASSERT_TRUE(store.Open(file.string(), &error)) << error;
  ASSERT_TRUE(AsSettings(store.Update(
      "qwen", Json{{"ctx_size", 8192}, {"ttl_seconds", 300}, {"pinned", true}, {"alias", "q"}}, registry)));
  ASSERT_TRUE(AsSettings(store.Update("llama", Json{{"ttl_seconds", 0}}, registry)));
  EXPECT_EQ(ReadText(file),
            "{\n"
            "  \"models\": {\n"
            "    \"llama\": {\n"
            "      \"ttl_seconds\": 0\n"
            "    },\n"
            "    \"qwen\": {\n"
            "      \"alias\": \"q\",\n"
            "      \"pinned\": true,\n"
            "      \"ttl_seconds\": 300,\n"
            "      \"ctx_size\": 8192\n"
            "    }\n"
            "  }\n"
            "}\n");
}

TEST(ModelSettings, RoundTrip) {
  TempDir dir;
  const fs::path file = dir.path() / "models.json";
  ModelRegistry registry = MakeRegistry(dir.path(), {"a", "b"});
  {
    ModelSettingsStore store;
    std::string error;
    ASSERT_TRUE(store.Open(file.string(), &error)) << error;
    ASSERT_TRUE(AsSettings(store.Update("a", Json{{"alias", "first"}, {"ttl_seconds", 60}}, registry)));
    ASSERT_TRUE(AsSettings(store.Update("b", Json{{"pinned", true}, {"ctx_size", 16}}, registry)));
    ASSERT_TRUE(AsSettings(store.Update("a", Json{{"ctx_size", 16777216}}, registry)));  // merges
  }
  ModelSettingsStore reopened;
  std::string error;
  ASSERT_TRUE(reopened.Open(file.string(), &error)) << error;
  ModelSettings a;
  a.alias = "first";
  a.ttl_seconds = 60;
  a.ctx_size = 16777216;
  ModelSettings b;
  b.pinned = true;
  b.ctx_size = 16;
  EXPECT_EQ(reopened.Get("a"), a);
  EXPECT_EQ(reopened.Get("b"), b);
  EXPECT_EQ(reopened.All().size(), 2u);
  EXPECT_EQ(reopened.IdForAlias("FIRST"), "a");
  EXPECT_EQ(reopened.IdForAlias("second"), "");
}

TEST(ModelSettings, NullClearsAndDefaultEntriesDisappear) {
  TempDir dir;
  const fs::path file = dir.path() / "models.json";
  ModelRegistry registry = MakeRegistry(dir.path(), {"m"});
  ModelSettingsStore store;
  std::string error;
  ASSERT_TRUE(store.Open(file.string(), &error)) << error;
  ASSERT_TRUE(AsSettings(
      store.Update("m", Json{{"alias", "x"}, {"pinned", true}, {"ttl_seconds", 5}, {"ctx_size", 64}}, registry)));
  auto cleared = store.Update("m", Json{{"alias", nullptr}, {"ttl_seconds", nullptr}}, registry);
  ASSERT_NE(AsSettings(cleared), nullptr);
  EXPECT_FALSE(AsSettings(cleared)->alias.has_value());
  EXPECT_FALSE(AsSettings(cleared)->ttl_seconds.has_value());
  EXPECT_TRUE(AsSettings(cleared)->pinned);
  EXPECT_EQ(AsSettings(cleared)->ctx_size, 64);
  EXPECT_EQ(store.IdForAlias("x"), "");

  ASSERT_TRUE(AsSettings(store.Update("m", Json{{"pinned", nullptr}, {"ctx_size", nullptr}}, registry)));
  EXPECT_TRUE(store.All().empty());
  EXPECT_EQ(ReadText(file), "{\n  \"models\": {}\n}\n");
}

TEST(ModelSettings, InvalidPatchesRejectedAndFileUnchanged) {
  TempDir dir;
  const fs::path file = dir.path() / "models.json";
  ModelRegistry registry = MakeRegistry(dir.path(), {"m"});
  ModelSettingsStore store;
  std::string error;
  ASSERT_TRUE(store.Open(file.string(), &error)) << error;
  ASSERT_TRUE(AsSettings(store.Update("m", Json{{"alias", "keep"}, {"ttl_seconds", 10}}, registry)));
  const std::string before = ReadText(file);
  const ModelSettings settings_before = store.Get("m");

  struct Case {
    Json patch;
    std::string field;
  };
  const std::vector<Case> cases = {
      {Json{{"alias", ""}}, "alias"},
      {Json{{"alias", std::string(129, 'a')}}, "alias"},
      {Json{{"alias", "has space"}}, "alias"},
      {Json{{"alias", "ünïcode"}}, "alias"},
      {Json{{"alias", 5}}, "alias"},
      {Json{{"pinned", "yes"}}, "pinned"},
      {Json{{"pinned", 1}}, "pinned"},
      {Json{{"ttl_seconds", -1}}, "ttl_seconds"},
      {Json{{"ttl_seconds", 31536001}}, "ttl_seconds"},
      {Json{{"ttl_seconds", 30.5}}, "ttl_seconds"},
      {Json{{"ttl_seconds", 30.0}}, "ttl_seconds"},
      {Json{{"ttl_seconds", "30"}}, "ttl_seconds"},
      {Json{{"ttl_seconds", 18446744073709551615ull}}, "ttl_seconds"},
      {Json{{"ctx_size", 15}}, "ctx_size"},
      {Json{{"ctx_size", 16777217}}, "ctx_size"},
      {Json{{"ctx_size", true}}, "ctx_size"},
      {Json{{"ttl_seconds", 20}, {"colour", "red"}}, "colour"},  // valid fields before do not apply either
      {Json::array({1, 2}), ""},
      {Json("pinned"), ""},
  };
  for (const Case& c : cases) {
    auto result = store.Update("m", c.patch, registry);
    const SettingsError* err = AsError(result);
    ASSERT_NE(err, nullptr) << c.patch.dump();
    EXPECT_EQ(err->field, c.field) << c.patch.dump();
    EXPECT_FALSE(err->message.empty());
    EXPECT_EQ(ReadText(file), before) << c.patch.dump();
    EXPECT_EQ(store.Get("m"), settings_before) << c.patch.dump();
  }
  // The limits themselves are valid.
  EXPECT_TRUE(AsSettings(store.Update("m", Json{{"alias", std::string(128, 'a')}}, registry)));
  EXPECT_TRUE(AsSettings(store.Update("m", Json{{"alias", "org/Model-v1.5_q4:latest"}}, registry)));
  EXPECT_TRUE(AsSettings(store.Update("m", Json{{"ttl_seconds", 31536000}, {"ctx_size", 16}}, registry)));
  EXPECT_TRUE(AsSettings(store.Update("m", Json::object(), registry)));
}

TEST(ModelSettings, AliasCollisionsRejected) {
  TempDir dir;
  const fs::path file = dir.path() / "models.json";
  ModelRegistry registry = MakeRegistry(dir.path(), {"alpha", "Beta"});
  ModelSettingsStore store;
  std::string error;
  ASSERT_TRUE(store.Open(file.string(), &error)) << error;
  ASSERT_TRUE(AsSettings(store.Update("alpha", Json{{"alias", "fast"}}, registry)));
  const std::string before = ReadText(file);

  // Another model's id, ignoring case.
  auto r1 = store.Update("alpha", Json{{"alias", "beta"}}, registry);
  ASSERT_NE(AsError(r1), nullptr);
  EXPECT_EQ(AsError(r1)->field, "alias");
  EXPECT_NE(AsError(r1)->message.find("Beta"), std::string::npos) << AsError(r1)->message;
  // Another model's alias, ignoring case.
  auto r2 = store.Update("Beta", Json{{"alias", "FAST"}}, registry);
  ASSERT_NE(AsError(r2), nullptr);
  EXPECT_EQ(AsError(r2)->field, "alias");
  EXPECT_NE(AsError(r2)->message.find("alpha"), std::string::npos) << AsError(r2)->message;
  EXPECT_EQ(ReadText(file), before);
  EXPECT_EQ(store.IdForAlias("fast"), "alpha");

  // The model's own id and its own current alias are fine.
  EXPECT_TRUE(AsSettings(store.Update("alpha", Json{{"alias", "ALPHA"}}, registry)));
  EXPECT_TRUE(AsSettings(store.Update("alpha", Json{{"alias", "fast"}}, registry)));
  EXPECT_TRUE(AsSettings(store.Update("alpha", Json{{"alias", "Fast"}}, registry)));
  // Updating other fields does not re-check an unchanged alias.
  EXPECT_TRUE(AsSettings(store.Update("alpha", Json{{"pinned", true}}, registry)));
  // Once freed, the alias can move to another model.
  EXPECT_TRUE(AsSettings(store.Update("alpha", Json{{"alias", nullptr}}, registry)));
  EXPECT_TRUE(AsSettings(store.Update("Beta", Json{{"alias", "fast"}}, registry)));
  EXPECT_EQ(store.IdForAlias("fast"), "Beta");
}

TEST(ModelSettings, KeepsEntriesForModelsNotDiscovered) {
  TempDir dir;
  const fs::path file = dir.path() / "models.json";
  WriteText(file, R"({"models": {"gone": {"alias": "old", "pinned": true}}})");
  ModelRegistry registry = MakeRegistry(dir.path(), {"here"});
  ModelSettingsStore store;
  std::string error;
  ASSERT_TRUE(store.Open(file.string(), &error)) << error;
  EXPECT_TRUE(store.Get("gone").pinned);
  EXPECT_EQ(store.IdForAlias("old"), "gone");
  // The absent model's alias is still reserved.
  auto taken = store.Update("here", Json{{"alias", "old"}}, registry);
  ASSERT_NE(AsError(taken), nullptr);
  ASSERT_TRUE(AsSettings(store.Update("here", Json{{"ttl_seconds", 1}}, registry)));
  ModelSettingsStore reopened;
  ASSERT_TRUE(reopened.Open(file.string(), &error)) << error;
  EXPECT_EQ(reopened.All().size(), 2u);
  EXPECT_EQ(reopened.Get("gone").alias, "old");
}

TEST(ModelSettings, MalformedFileFailsNamingIt) {
  TempDir dir;
  const std::vector<std::string> bad_files = {
      "",
      "{",
      "[]",
      R"({"models": []})",
      R"({"models": {"m": 5}})",
      R"({"models": {"m": {"pinned": "true"}}})",
      R"({"models": {"m": {"ttl_seconds": -5}}})",
      R"({"models": {"m": {"ctx_size": 1}}})",
      R"({"models": {"m": {"alias": "bad alias"}}})",
      R"({"models": {"m": {"colour": "red"}}})",
      R"({"models": {}, "version": 2})",
      R"({"models": {"a": {"alias": "x"}, "b": {"alias": "X"}}})",
  };
  int n = 0;
  for (const std::string& text : bad_files) {
    const fs::path file = dir.path() / ("bad" + std::to_string(n++) + ".json");
    WriteText(file, text);
    ModelSettingsStore store;
    std::string error;
    EXPECT_FALSE(store.Open(file.string(), &error)) << text;
    EXPECT_NE(error.find(file.string()), std::string::npos) << error;
    EXPECT_TRUE(store.All().empty());
  }
  // A directory where the file should be.
  ModelSettingsStore store;
  std::string error;
  EXPECT_FALSE(store.Open(dir.path().string(), &error));
  EXPECT_NE(error.find(dir.path().string()), std::string::npos) << error;
}

TEST(ModelSettings, HandWrittenFileIsRead) {
  TempDir dir;
  const fs::path file = dir.path() / "models.json";
  WriteText(file, R"({ "models": { "m": { "alias": "x", "pinned": false, "ttl_seconds": null, "ctx_size": 8192 } } })");
  ModelSettingsStore store;
  std::string error;
  ASSERT_TRUE(store.Open(file.string(), &error)) << error;
  ModelSettings expected;
  expected.alias = "x";
  expected.ctx_size = 8192;
  EXPECT_EQ(store.Get("m"), expected);
  // An empty object is an empty store too.
  WriteText(file, "{}");
  ModelSettingsStore empty;
  ASSERT_TRUE(empty.Open(file.string(), &error)) << error;
  EXPECT_TRUE(empty.All().empty());
}

TEST(ModelSettings, WritesAtomicallyLeavingNoTempFiles) {
  TempDir dir;
  const fs::path conf = dir.path() / "conf";
  const fs::path file = conf / "models.json";
  ModelRegistry registry = MakeRegistry(dir.path(), {"a", "b", "c", "d"});
  ModelSettingsStore store;
  std::string error;
  ASSERT_TRUE(store.Open(file.string(), &error)) << error;
  std::vector<std::thread> threads;
  for (const char* id : {"a", "b", "c", "d"}) {
    threads.emplace_back([&, id] {
      for (int i = 1; i <= 20; ++i) {
        auto r = store.Update(id, Json{{"ttl_seconds", i}}, registry);
        EXPECT_NE(AsSettings(r), nullptr);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(DirNames(conf), std::vector<std::string>{"models.json"});
  ModelSettingsStore reopened;
  ASSERT_TRUE(reopened.Open(file.string(), &error)) << error;
  for (const char* id : {"a", "b", "c", "d"}) EXPECT_EQ(reopened.Get(id).ttl_seconds, 20) << id;
}

TEST(ModelSettings, WriteFailureChangesNothing) {
  TempDir dir;
  WriteText(dir.path() / "blocker", "not a directory");
  const fs::path file = dir.path() / "blocker" / "models.json";
  ModelRegistry registry = MakeRegistry(dir.path(), {"m"});
  ModelSettingsStore store;
  std::string error;
  ASSERT_TRUE(store.Open(file.string(), &error)) << error;  // missing: empty store
  auto r = store.Update("m", Json{{"pinned", true}}, registry);
  ASSERT_NE(AsError(r), nullptr);
  EXPECT_EQ(AsError(r)->field, "");
  EXPECT_NE(AsError(r)->message.find(file.string()), std::string::npos) << AsError(r)->message;
  EXPECT_FALSE(store.Get("m").pinned);
}

TEST(ModelSettings, DefaultSettingsPath) {
  const char* old_xdg = std::getenv("XDG_CONFIG_HOME");
  const char* old_home = std::getenv("HOME");
  const std::string saved_xdg = old_xdg ? old_xdg : "";
  const std::string saved_home = old_home ? old_home : "";

  setenv("XDG_CONFIG_HOME", "/xdg/conf", 1);
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(DefaultSettingsPath(), "/xdg/conf/llmux/models.json");
  unsetenv("XDG_CONFIG_HOME");
  EXPECT_EQ(DefaultSettingsPath(), "/home/someone/.config/llmux/models.json");
  setenv("XDG_CONFIG_HOME", "", 1);
  EXPECT_EQ(DefaultSettingsPath(), "/home/someone/.config/llmux/models.json");

  if (old_xdg) setenv("XDG_CONFIG_HOME", saved_xdg.c_str(), 1); else unsetenv("XDG_CONFIG_HOME");
  if (old_home) setenv("HOME", saved_home.c_str(), 1); else unsetenv("HOME");
}

// Resolution order: exact id > case-insensitive id > alias.
TEST(ModelResolver, ExactThenCaseInsensitiveThenAlias) {
  TempDir dir;
  ModelRegistry registry = MakeRegistry(dir.path(), {"alpha", "Beta", "beta", "gamma"});
  // Written by hand: Update would refuse these aliases, but a file may hold them.
  const fs::path file = dir.path() / "models.json";
  WriteText(file, R"({"models": {
    "alpha": {"alias": "BETA"},
    "gamma": {"alias": "g"},
    "absent": {"alias": "ghost"},
    "Beta": {"alias": "GAMMA"}
  }})");
  ModelSettingsStore settings;
  std::string error;
  ASSERT_TRUE(settings.Open(file.string(), &error)) << error;

  auto id_of = [&](std::string_view name) -> std::string {
    const ModelEntry* e = ResolveModel(registry, settings, name);
    return e ? e->id : "<none>";
  };
  EXPECT_EQ(id_of("beta"), "beta");    // exact
  EXPECT_EQ(id_of("Beta"), "Beta");    // exact
  EXPECT_EQ(id_of("BETA"), "Beta");    // case-insensitive id beats alpha's alias "BETA"
  EXPECT_EQ(id_of("GAMMA"), "gamma");  // case-insensitive id beats Beta's alias "GAMMA"
  EXPECT_EQ(id_of("g"), "gamma");      // alias
  EXPECT_EQ(id_of("G"), "gamma");      // alias, ignoring case
  EXPECT_EQ(id_of("ghost"), "<none>"); // alias of a model that is not discovered
  EXPECT_EQ(id_of("delta"), "<none>");
  EXPECT_EQ(id_of(""), "<none>");
}

TEST(ModelResolver, AliasSetAtRuntime) {
  TempDir dir;
  ModelRegistry registry = MakeRegistry(dir.path(), {"qwen2.5-0.5b-instruct-q4_k_m"});
  ModelSettingsStore settings;
  std::string error;
  ASSERT_TRUE(settings.Open((dir.path() / "models.json").string(), &error)) << error;
  EXPECT_EQ(ResolveModel(registry, settings, "qwen"), nullptr);
  ASSERT_TRUE(AsSettings(settings.Update("qwen2.5-0.5b-instruct-q4_k_m", Json{{"alias", "qwen"}}, registry)));
  const ModelEntry* e = ResolveModel(registry, settings, "Qwen");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, "qwen2.5-0.5b-instruct-q4_k_m");
}

}  // namespace
}  // namespace llmux
