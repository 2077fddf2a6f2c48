// llmux-make-model: writes a random-weight Llama / Qwen2 GGUF model with a real tokenizer.
//
// The tokenizer (tokens, scores/merges, special token ids, and chat template when present) is
// copied from one of llama.cpp's metadata-only vocab files (models/ggml-vocab-<NAME>.gguf). The
// architecture hyper-parameters are then overridden, and every weight tensor is filled with
// pseudo-random numbers derived only from (--seed, tensor name, row index), using a PRNG
// implemented here (xoshiro256** + Box-Muller), so the same arguments and seed always produce a
// byte-identical file. The output embedding is tied to token_embd (no output.weight), as in
// Qwen2.5-0.5B.
//
// Tensors are generated, converted (F32 / F16 / Q8_0 / Q4_0) and written one batch of rows at a
// time, so memory use stays bounded (tens of MB) even for the ~530 MB `qwen05` preset.
//
//   llmux-make-model --preset tiny --out /tmp/tiny.gguf [--seed N] [overrides...]   (see --help)

#include "ggml.h"
#include "gguf.h"

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <unistd.h>
#include <vector>

// Set by CMake to ${LLAMA_CPP_DIR}/models.
#ifndef LLMUX_DEFAULT_VOCAB_DIR
#define LLMUX_DEFAULT_VOCAB_DIR "third_party/llama.cpp/models"
#endif

namespace {

constexpr uint64_t kDefaultSeed = 42;
constexpr float kRmsNormEps = 1e-6f;
constexpr float kRopeFreqBaseLlama = 10000.0f;
constexpr float kRopeFreqBaseQwen2 = 1000000.0f;

// Initialisation. A plain N(0, 0.02) everywhere makes a degenerate model: the layers barely
// change the residual stream, so the tied output head mostly sees the last token's own embedding
// and greedy decoding repeats one token forever. Instead:
//  * weight matrices use std = kMatrixGain / sqrt(fan_in); a gain of 2 lets the layers dominate the
//    residual stream, so the next token depends on the whole context (greedy output varies);
//  * token_embd uses std = kLogitStd / sqrt(n_embd). Through the tied output head this makes the
//    logits ~ N(0, kLogitStd) whatever the model size: peaked enough for greedy decoding to be
//    stable, flat enough for sampling at temperature ~1 to vary between seeds.
constexpr double kMatrixGain = 2.0;
constexpr double kLogitStd = 2.0;
constexpr double kBiasStd = 0.02;

constexpr int64_t kBatchElements = int64_t{1} << 22;  // floats generated per write batch (16 MiB)
constexpr unsigned kMaxThreads = 16;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr const char* kChatMlTemplate =
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\n' -}}"
    "{%- endif -%}";

// ---------------------------------------------------------------------------------------------
// Configuration and presets

struct ModelConfig {
  std::string arch;   // "llama" or "qwen2"
  std::string vocab;  // models/ggml-vocab-<vocab>.gguf
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ff = 0;
  int64_t n_ctx_train = 0;
  ggml_type type = GGML_TYPE_F16;  // type of the 2-D weight matrices
};

struct Preset {
  const char* name;
  const char* description;
  ModelConfig config;
};

const Preset kPresets[] = {
    {"tiny", "unit tests: llama, llama-spm vocab (32000 tokens), F16, a few MB",
     {"llama", "llama-spm", 64, 2, 4, 2, 128, 4096, GGML_TYPE_F16}},
    {"tiny-qwen2", "qwen2, qwen2 vocab (151936 tokens), Q8_0",
     {"qwen2", "qwen2", 64, 2, 4, 2, 128, 4096, GGML_TYPE_Q8_0}},
    {"qwen05", "Qwen2.5-0.5B shapes, Q8_0, about 530 MB",
     {"qwen2", "qwen2", 896, 24, 14, 2, 4864, 32768, GGML_TYPE_Q8_0}},
    {"demo", "`make run`: qwen2, 256 dim, 4 layers, Q8_0",
     {"qwen2", "qwen2", 256, 4, 4, 2, 768, 4096, GGML_TYPE_Q8_0}},
};

struct TypeName {
  const char* name;
  ggml_type type;
  uint32_t file_type;  // llama_ftype written to general.file_type
};

const TypeName kTypes[] = {
    {"f32", GGML_TYPE_F32, 0},
    {"f16", GGML_TYPE_F16, 1},
    {"q4_0", GGML_TYPE_Q4_0, 2},
    {"q8_0", GGML_TYPE_Q8_0, 7},
};

const char* const kArchs[] = {"llama", "qwen2"};

struct Options {
  std::string preset = "tiny";
  std::string out;
  std::string vocab_dir = LLMUX_DEFAULT_VOCAB_DIR;
  uint64_t seed = kDefaultSeed;
  std::optional<std::string> arch, vocab, name;
  std::optional<int64_t> n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx_train;
  std::optional<ggml_type> type;
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const Preset* FindPreset(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

const TypeName* FindType(ggml_type type) {
  for (const TypeName& t : kTypes) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Command line

int64_t ParseInt(std::string_view opt, std::string_view text, int64_t min_value) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min_value) {
    throw UsageError(std::string(opt) + ": expected an integer >= " + std::to_string(min_value) +
                     ", got '" + std::string(text) + "'");
  }
  return value;
}

uint64_t ParseSeed(std::string_view text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw UsageError("--seed: expected a non-negative integer, got '" + std::string(text) + "'");
  }
  return value;
}

ggml_type ParseType(std::string_view text) {
  for (const TypeName& t : kTypes) {
    if (text == t.name) return t.type;
  }
  throw UsageError("--type: expected f32, f16, q8_0 or q4_0, got '" + std::string(text) + "'");
}

std::string ParseArch(std::string_view text) {
  for (const char* arch : kArchs) {
    if (text == arch) return arch;
  }
  throw UsageError("--arch: expected llama or qwen2, got '" + std::string(text) + "'");
}

struct OptionDef {
  const char* name;
  const char* metavar;
  const char* help;
  std::function<void(Options&, std::string_view)> apply;
};

const std::vector<OptionDef>& OptionDefs() {
  static const std::vector<OptionDef> defs = {
      {"--preset", "NAME", "model preset (default: tiny); see the list below",
       [](Options& o, std::string_view v) { o.preset = v; }},
      {"--out", "FILE", "output .gguf path (required)",
       [](Options& o, std::string_view v) { o.out = v; }},
      {"--vocab-dir", "DIR",
       "directory holding ggml-vocab-*.gguf (default: " LLMUX_DEFAULT_VOCAB_DIR ")",
       [](Options& o, std::string_view v) { o.vocab_dir = v; }},
      {"--seed", "N", "random seed (default: 42); same arguments + seed => identical file",
       [](Options& o, std::string_view v) { o.seed = ParseSeed(v); }},
      {"--arch", "ARCH", "architecture: llama | qwen2",
       [](Options& o, std::string_view v) { o.arch = ParseArch(v); }},
      {"--vocab", "NAME", "tokenizer file ggml-vocab-NAME.gguf (e.g. llama-spm, llama-bpe, qwen2)",
       [](Options& o, std::string_view v) { o.vocab = std::string(v); }},
      {"--n-embd", "N", "embedding size",
       [](Options& o, std::string_view v) { o.n_embd = ParseInt("--n-embd", v, 1); }},
      {"--n-layer", "N", "number of transformer blocks",
       [](Options& o, std::string_view v) { o.n_layer = ParseInt("--n-layer", v, 1); }},
      {"--n-head", "N", "attention heads",
       [](Options& o, std::string_view v) { o.n_head = ParseInt("--n-head", v, 1); }},
      {"--n-head-kv", "N", "key/value heads (GQA)",
       [](Options& o, std::string_view v) { o.n_head_kv = ParseInt("--n-head-kv", v, 1); }},
      {"--n-ff", "N", "feed-forward size",
       [](Options& o, std::string_view v) { o.n_ff = ParseInt("--n-ff", v, 1); }},
      {"--n-ctx-train", "N", "training context length (<arch>.context_length)",
       [](Options& o, std::string_view v) { o.n_ctx_train = ParseInt("--n-ctx-train", v, 1); }},
      {"--type", "TYPE", "weight matrix type: f32 | f16 | q8_0 | q4_0 (norms/biases stay f32)",
       [](Options& o, std::string_view v) { o.type = ParseType(v); }},
      {"--name", "STR", "general.name (default: llmux-<preset>)",
       [](Options& o, std::string_view v) { o.name = std::string(v); }},
  };
  return defs;
}

void PrintHelp(FILE* out) {
  std::fprintf(out,
               "usage: llmux-make-model --preset NAME --out FILE.gguf [options]\n\n"
               "Writes a GGUF model with random weights and a real llama.cpp tokenizer.\n"
               "Output is deterministic for a given set of arguments and --seed.\n\n"
               "options (--opt VALUE or --opt=VALUE):\n");
  for (const OptionDef& d : OptionDefs()) {
    std::fprintf(out, "  %-13s %-5s %s\n", d.name, d.metavar, d.help);
  }
  std::fprintf(out, "  %-19s %s\n\npresets:\n", "-h, --help", "show this help");
  for (const Preset& p : kPresets) {
    const ModelConfig& c = p.config;
    std::fprintf(out,
                 "  %-10s %s\n"
                 "             arch=%s vocab=%s n_embd=%lld n_layer=%lld n_head=%lld n_head_kv=%lld"
                 " n_ff=%lld n_ctx_train=%lld type=%s\n",
                 p.name, p.description, c.arch.c_str(), c.vocab.c_str(), (long long)c.n_embd,
                 (long long)c.n_layer, (long long)c.n_head, (long long)c.n_head_kv,
                 (long long)c.n_ff, (long long)c.n_ctx_train, FindType(c.type)->name);
  }
}

// Returns std::nullopt when --help was requested.
std::optional<Options> ParseArgs(std::span<char* const> args) {
  Options opts;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "-h" || arg == "--help") return std::nullopt;

    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (const size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    const auto& defs = OptionDefs();
    const auto def = std::find_if(defs.begin(), defs.end(),
                                  [&](const OptionDef& d) { return name == d.name; });
    if (def == defs.end()) throw UsageError("unknown argument '" + std::string(arg) + "'");
    if (!value) {
      if (i + 1 >= args.size()) throw UsageError(std::string(name) + ": missing value");
      value = args[++i];
    }
    def->apply(opts, *value);
  }
  if (opts.out.empty()) throw UsageError("--out is required");
  return opts;
}

ModelConfig ResolveConfig(const Options& o) {
  const Preset* preset = FindPreset(o.preset);
  if (!preset) throw UsageError("unknown preset '" + o.preset + "' (see --help)");
  ModelConfig c = preset->config;
  c.arch = o.arch.value_or(c.arch);
  c.vocab = o.vocab.value_or(c.vocab);
  c.n_embd = o.n_embd.value_or(c.n_embd);
  c.n_layer = o.n_layer.value_or(c.n_layer);
  c.n_head = o.n_head.value_or(c.n_head);
  c.n_head_kv = o.n_head_kv.value_or(c.n_head_kv);
  c.n_ff = o.n_ff.value_or(c.n_ff);
  c.n_ctx_train = o.n_ctx_train.value_or(c.n_ctx_train);
  c.type = o.type.value_or(c.type);

  if (c.n_embd % c.n_head != 0) throw UsageError("n_embd must be divisible by n_head");
  if ((c.n_embd / c.n_head) % 2 != 0) {
    throw UsageError("head size n_embd/n_head must be even (RoPE)");
  }
  if (c.n_head % c.n_head_kv != 0) throw UsageError("n_head must be divisible by n_head_kv");
  return c;
}

// ---------------------------------------------------------------------------------------------
// Deterministic random numbers (platform independent apart from libm's log/cos/sin rounding)

uint64_t Mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char ch : s) {
    h ^= static_cast<unsigned char>(ch);
    h *= 0x100000001b3ULL;
  }
  return h;
}

class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (uint64_t& word : s_) word = seed = Mix64(seed);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in the open interval (0, 1).
  double Uniform() { return (static_cast<double>(Next() >> 11) + 0.5) * 0x1.0p-53; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// Fills `row` with N(0, stddev) samples (Box-Muller, both outputs used).
void FillNormal(Xoshiro256& rng, double stddev, std::span<float> row) {
  constexpr double kTwoPi = 6.283185307179586476925;
  for (size_t i = 0; i < row.size(); i += 2) {
    const double radius = stddev * std::sqrt(-2.0 * std::log(rng.Uniform()));
    const double angle = kTwoPi * rng.Uniform();
    row[i] = static_cast<float>(radius * std::cos(angle));
    if (i + 1 < row.size()) row[i + 1] = static_cast<float>(radius * std::sin(angle));
  }
}

// ---------------------------------------------------------------------------------------------
// Tensor plan

enum class Init { kNormal, kOnes };

struct TensorSpec {
  std::string name;
  int64_t ne0 = 0;  // row length
  int64_t ne1 = 1;  // rows (1 for vectors)
  bool is_matrix = false;
  ggml_type type = GGML_TYPE_F32;
  Init init = Init::kNormal;
  double stddev = 0.0;  // for Init::kNormal

  int64_t n_elements() const { return ne0 * ne1; }
  size_t row_bytes() const { return ggml_row_size(type, ne0); }
  size_t n_bytes() const { return row_bytes() * static_cast<size_t>(ne1); }
};

// Matrices get the requested type when their rows split into whole blocks, else F16.
ggml_type MatrixType(ggml_type requested, int64_t ne0) {
  return ne0 % ggml_blck_size(requested) == 0 ? requested : GGML_TYPE_F16;
}

std::vector<TensorSpec> PlanTensors(const ModelConfig& c, int64_t n_vocab) {
  const int64_t head_dim = c.n_embd / c.n_head;
  const int64_t q_dim = head_dim * c.n_head;
  const int64_t kv_dim = head_dim * c.n_head_kv;
  const bool has_qkv_bias = c.arch == "qwen2";

  std::vector<TensorSpec> t;
  auto add_matrix = [&](std::string name, int64_t ne0, int64_t ne1, double stddev) {
    t.push_back({std::move(name), ne0, ne1, true, MatrixType(c.type, ne0), Init::kNormal, stddev});
  };
  auto add_vector = [&](std::string name, int64_t n, Init init, double stddev) {
    t.push_back({std::move(name), n, 1, false, GGML_TYPE_F32, init, stddev});
  };
  auto gain = [](int64_t fan_in) { return kMatrixGain / std::sqrt(static_cast<double>(fan_in)); };

  const double token_embd_std = kLogitStd / std::sqrt(static_cast<double>(c.n_embd));

  add_matrix("token_embd.weight", c.n_embd, n_vocab, token_embd_std);
  add_vector("output_norm.weight", c.n_embd, Init::kOnes, 0.0);
  // No output.weight: llama.cpp ties the output head to token_embd.
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string blk = "blk." + std::to_string(i) + ".";
    add_vector(blk + "attn_norm.weight", c.n_embd, Init::kOnes, 0.0);
    add_matrix(blk + "attn_q.weight", c.n_embd, q_dim, gain(c.n_embd));
    add_matrix(blk + "attn_k.weight", c.n_embd, kv_dim, gain(c.n_embd));
    add_matrix(blk + "attn_v.weight", c.n_embd, kv_dim, gain(c.n_embd));
    if (has_qkv_bias) {
      add_vector(blk + "attn_q.bias", q_dim, Init::kNormal, kBiasStd);
      add_vector(blk + "attn_k.bias", kv_dim, Init::kNormal, kBiasStd);
      add_vector(blk + "attn_v.bias", kv_dim, Init::kNormal, kBiasStd);
    }
    add_matrix(blk + "attn_output.weight", q_dim, c.n_embd, gain(q_dim));
    add_vector(blk + "ffn_norm.weight", c.n_embd, Init::kOnes, 0.0);
    add_matrix(blk + "ffn_gate.weight", c.n_embd, c.n_ff, gain(c.n_embd));
    add_matrix(blk + "ffn_up.weight", c.n_embd, c.n_ff, gain(c.n_embd));
    add_matrix(blk + "ffn_down.weight", c.n_ff, c.n_embd, gain(c.n_ff));
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// Metadata

struct GgufDeleter {
  void operator()(gguf_context* ctx) const { gguf_free(ctx); }
};
struct GgmlDeleter {
  void operator()(ggml_context* ctx) const { ggml_free(ctx); }
};
using GgufPtr = std::unique_ptr<gguf_context, GgufDeleter>;
using GgmlPtr = std::unique_ptr<ggml_context, GgmlDeleter>;

std::string ArchKey(const std::string& arch, const char* suffix) { return arch + "." + suffix; }

std::optional<float> FindF32(const gguf_context* ctx, const std::string& key) {
  const int64_t id = gguf_find_key(ctx, key.c_str());
  if (id < 0 || gguf_get_kv_type(ctx, id) != GGUF_TYPE_FLOAT32) return std::nullopt;
  return gguf_get_val_f32(ctx, id);
}

GgufPtr LoadVocab(const std::string& path) {
  gguf_init_params params = {/*no_alloc =*/true, /*ctx =*/nullptr};
  GgufPtr vocab(gguf_init_from_file(path.c_str(), params));
  if (!vocab) throw std::runtime_error("cannot read vocab file " + path);
  return vocab;
}

int64_t TokenCount(const gguf_context* vocab) {
  const int64_t id = gguf_find_key(vocab, "tokenizer.ggml.tokens");
  if (id < 0 || gguf_get_kv_type(vocab, id) != GGUF_TYPE_ARRAY) {
    throw std::runtime_error("vocab file has no tokenizer.ggml.tokens array");
  }
  return static_cast<int64_t>(gguf_get_arr_n(vocab, id));
}

void RemoveKeysWithPrefix(gguf_context* ctx, const std::string& prefix) {
  std::vector<std::string> doomed;
  for (int64_t i = 0; i < gguf_get_n_kv(ctx); ++i) {
    const std::string_view key = gguf_get_key(ctx, i);
    if (key.starts_with(prefix)) doomed.emplace_back(key);
  }
  for (const std::string& key : doomed) gguf_remove_key(ctx, key.c_str());
}

// All KV pairs of the vocab file, with the hparams replaced by those of `c`.
GgufPtr BuildMetadata(const ModelConfig& c, const gguf_context* vocab, int64_t n_vocab,
                      const std::string& model_name) {
  const int64_t arch_id = gguf_find_key(vocab, "general.architecture");
  const std::string vocab_arch = arch_id >= 0 ? gguf_get_val_str(vocab, arch_id) : c.arch;
  const bool had_vocab_size = gguf_find_key(vocab, ArchKey(vocab_arch, "vocab_size").c_str()) >= 0;
  const float default_freq_base = c.arch == "qwen2" ? kRopeFreqBaseQwen2 : kRopeFreqBaseLlama;
  const float freq_base =
      FindF32(vocab, ArchKey(vocab_arch, "rope.freq_base")).value_or(default_freq_base);

  GgufPtr meta(gguf_init_empty());
  gguf_set_kv(meta.get(), vocab);
  // The vocab file's hparams describe some 7B model: drop them all and write ours.
  RemoveKeysWithPrefix(meta.get(), vocab_arch + ".");
  RemoveKeysWithPrefix(meta.get(), c.arch + ".");

  gguf_context* m = meta.get();
  const auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  gguf_set_val_str(m, "general.architecture", c.arch.c_str());
  gguf_set_val_str(m, "general.name", model_name.c_str());
  gguf_set_val_u32(m, "general.file_type", FindType(c.type)->file_type);
  gguf_set_val_u32(m, ArchKey(c.arch, "block_count").c_str(), u32(c.n_layer));
  gguf_set_val_u32(m, ArchKey(c.arch, "context_length").c_str(), u32(c.n_ctx_train));
  gguf_set_val_u32(m, ArchKey(c.arch, "embedding_length").c_str(), u32(c.n_embd));
  gguf_set_val_u32(m, ArchKey(c.arch, "feed_forward_length").c_str(), u32(c.n_ff));
  gguf_set_val_u32(m, ArchKey(c.arch, "attention.head_count").c_str(), u32(c.n_head));
  gguf_set_val_u32(m, ArchKey(c.arch, "attention.head_count_kv").c_str(), u32(c.n_head_kv));
  gguf_set_val_f32(m, ArchKey(c.arch, "attention.layer_norm_rms_epsilon").c_str(), kRmsNormEps);
  gguf_set_val_u32(m, ArchKey(c.arch, "rope.dimension_count").c_str(), u32(c.n_embd / c.n_head));
  gguf_set_val_f32(m, ArchKey(c.arch, "rope.freq_base").c_str(), freq_base);
  if (had_vocab_size) gguf_set_val_u32(m, ArchKey(c.arch, "vocab_size").c_str(), u32(n_vocab));

  if (gguf_find_key(m, "tokenizer.chat_template") < 0) {
    gguf_set_val_str(m, "tokenizer.chat_template", kChatMlTemplate);
  }
  if (gguf_find_key(m, "tokenizer.ggml.eos_token_id") < 0) {
    throw std::runtime_error("vocab file has no tokenizer.ggml.eos_token_id");
  }
  return meta;
}

// Registers the tensor infos (shape, type, name; no data) in `meta`. gguf_add_tensor copies the
// tensor struct, so the metadata-only ggml context can be freed right after.
void AddTensorInfos(gguf_context* meta, const std::vector<TensorSpec>& specs) {
  ggml_init_params params = {/*mem_size =*/ggml_tensor_overhead() * (specs.size() + 1),
                             /*mem_buffer =*/nullptr, /*no_alloc =*/true};
  GgmlPtr ctx(ggml_init(params));
  if (!ctx) throw std::runtime_error("ggml_init failed");
  for (const TensorSpec& s : specs) {
    ggml_tensor* t = s.is_matrix ? ggml_new_tensor_2d(ctx.get(), s.type, s.ne0, s.ne1)
                                 : ggml_new_tensor_1d(ctx.get(), s.type, s.ne0);
    ggml_set_name(t, s.name.c_str());
    gguf_add_tensor(meta, t);  // copies the tensor struct
  }
}

// ---------------------------------------------------------------------------------------------
// Tensor data

uint64_t RowSeed(uint64_t seed, uint64_t name_hash, int64_t row) {
  return Mix64(Mix64(seed ^ Mix64(name_hash)) + static_cast<uint64_t>(row));
}

// Generates rows [first, first + n) of `spec` as floats into `src` and converts them into `dst`.
void MakeRows(const TensorSpec& spec, uint64_t seed, uint64_t name_hash, int64_t first, int64_t n,
              float* src, uint8_t* dst) {
  for (int64_t r = 0; r < n; ++r) {
    std::span<float> row(src + r * spec.ne0, static_cast<size_t>(spec.ne0));
    if (spec.init == Init::kOnes) {
      std::fill(row.begin(), row.end(), 1.0f);
    } else {
      Xoshiro256 rng(RowSeed(seed, name_hash, first + r));
      FillNormal(rng, spec.stddev, row);
    }
  }
  ggml_quantize_chunk(spec.type, src, dst, 0, n, spec.ne0, nullptr);
}

// Runs fn(begin, end) over [0, n) split into contiguous ranges, one per thread.
void ParallelRanges(unsigned n_threads, int64_t n,
                    const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n_parts = std::min<int64_t>(n_threads, n);
  std::vector<std::jthread> workers;
  for (int64_t p = 1; p < n_parts; ++p) {
    workers.emplace_back([&, p] { fn(n * p / n_parts, n * (p + 1) / n_parts); });
  }
  fn(0, n / n_parts);
}

void WriteBytes(FILE* f, const void* data, size_t n) {
  if (n > 0 && std::fwrite(data, 1, n, f) != n) throw std::runtime_error("write failed");
}

void WriteTensorData(FILE* f, const TensorSpec& spec, uint64_t seed, size_t alignment,
                     unsigned n_threads) {
  const int64_t batch_rows = std::max<int64_t>(1, kBatchElements / spec.ne0);
  const int64_t max_rows = std::min(batch_rows, spec.ne1);
  std::vector<float> src(static_cast<size_t>(max_rows * spec.ne0));
  std::vector<uint8_t> dst(static_cast<size_t>(max_rows) * spec.row_bytes());
  const uint64_t name_hash = Fnv1a64(spec.name);

  for (int64_t first = 0; first < spec.ne1; first += batch_rows) {
    const int64_t n = std::min(batch_rows, spec.ne1 - first);
    ParallelRanges(n_threads, n, [&](int64_t begin, int64_t end) {
      MakeRows(spec, seed, name_hash, first + begin, end - begin, src.data() + begin * spec.ne0,
               dst.data() + static_cast<size_t>(begin) * spec.row_bytes());
    });
    WriteBytes(f, dst.data(), static_cast<size_t>(n) * spec.row_bytes());
  }
  const std::vector<uint8_t> zeros(GGML_PAD(spec.n_bytes(), alignment) - spec.n_bytes(), 0);
  WriteBytes(f, zeros.data(), zeros.size());
}

void WriteModel(const std::string& path, const gguf_context* meta,
                const std::vector<TensorSpec>& specs, uint64_t seed) {
  const unsigned n_threads = std::clamp(std::thread::hardware_concurrency(), 1u, kMaxThreads);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  if (!gguf_write_to_file_ptr(meta, f.get(), /*only_meta =*/true)) {
    throw std::runtime_error("failed to write GGUF metadata");
  }
  const size_t alignment = gguf_get_alignment(meta);
  for (const TensorSpec& spec : specs) WriteTensorData(f.get(), spec, seed, alignment, n_threads);
  if (std::fclose(f.release()) != 0) throw std::runtime_error("write failed: " + path);
}

// ---------------------------------------------------------------------------------------------

int Run(const Options& opts) {
  const ModelConfig config = ResolveConfig(opts);
  const std::string vocab_path = opts.vocab_dir + "/ggml-vocab-" + config.vocab + ".gguf";
  if (!std::filesystem::is_regular_file(vocab_path)) {
    throw UsageError("vocab file not found: " + vocab_path + " (check --vocab / --vocab-dir)");
  }
  const std::string model_name = opts.name.value_or("llmux-" + opts.preset);

  const GgufPtr vocab = LoadVocab(vocab_path);
  const int64_t n_vocab = TokenCount(vocab.get());
  const std::vector<TensorSpec> specs = PlanTensors(config, n_vocab);
  const GgufPtr meta = BuildMetadata(config, vocab.get(), n_vocab, model_name);
  AddTensorInfos(meta.get(), specs);

  // Write to a temporary name and rename, so readers never see a half-written model.
  const std::string tmp_path = opts.out + ".tmp." + std::to_string(::getpid());
  try {
    WriteModel(tmp_path, meta.get(), specs, opts.seed);
    std::filesystem::rename(tmp_path, opts.out);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp_path, ignored);
    throw;
  }

  int64_t n_params = 0;
  for (const TensorSpec& s : specs) n_params += s.n_elements();
  std::printf("%s: %llu bytes, %lld parameters\n", opts.out.c_str(),
              static_cast<unsigned long long>(std::filesystem::file_size(opts.out)),
              static_cast<long long>(n_params));
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<Options> opts;
  try {
    opts = ParseArgs(std::span<char* const>(argv + 1, static_cast<size_t>(argc - 1)));
    if (!opts) {
      PrintHelp(stdout);
      return kExitOk;
    }
    return Run(*opts);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "llmux-make-model: %s\n(run with --help for usage)\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llmux-make-model: error: %s\n", e.what());
    return kExitFailure;
  }
}
