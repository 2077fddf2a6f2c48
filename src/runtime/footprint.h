// Footprint: what loading a model and creating its context will allocate,
// predicted before anything is allocated.
//
// PredictFootprint runs llama.cpp's no_alloc dry run: it reads the GGUF's
// metadata and tensor table (no tensor data), builds the model and a context
// with exactly the parameters Model::Load and Context::Create use
// (runtime/llama_params.h), reads llama.cpp's memory breakdown and frees both.
// Every buffer type is summed, host and device alike: the footprint is memory
// of the process or of the machine either way.
//
// What the numbers mean, in RSS terms (CPU build):
//   weights  mmap: RssFile (clean, file-backed). Repacked tensors (CPU_REPACK,
//            repack_weights=true) add an anonymous copy while their mapped
//            source pages stay resident too, so they are counted twice.
//            No mmap: RssAnon.
//   kv       RssAnon from context creation (llama.cpp clears the whole buffer).
//   compute  RssAnon, touched lazily by the first decodes; the size reserved
//            for the worst-case ubatch.
//   outputs  RssAnon: the logits buffer, n_vocab x sequences floats (llmux caps
//            n_outputs_max at the sequence count).
// Not included: the vocabulary's heap structures (token strings, the token ->
// id map, BPE merge ranks), load temporaries freed but left resident,
// llama.cpp's small per-context vectors, ggml's per-decode work buffer and
// thread stacks. Measured on top of the prediction (after malloc_trim): about
// 7 MiB for a 32k-token SPM vocabulary, 41-45 MiB for the 152k-token Qwen2 BPE
// vocabulary (under 300 bytes per vocabulary token, plus a few MiB), and about
// 11 MiB more of freed load temporaries until the heap is trimmed. Budget for
// it separately.
//
// The compute figure is the worst case (a full ubatch attending to every KV
// cell); a decode touches only what its KV span needs, so RSS reaches it only
// as the KV fills. With mmap and repacking, "counted twice" is an upper bound:
// llama.cpp unmaps mapped ranges at the file's ends that no non-repacked
// tensor uses, so a repacked tensor there (typically output.weight) is resident
// once.
//
// Thread-safety: PredictFootprint may be called from any thread, concurrently
// with engines of other models running and with other PredictFootprint calls;
// each call creates and frees its own llama.cpp objects and leaves the log
// callback alone.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/context.h"
#include "runtime/model.h"

namespace llmux::runtime {

// Measured: a 152k-token vocabulary takes 41-45 MiB and a 32k one about 7 MiB
// beyond the reported buffers (tests/unit/footprint_test.cc): under 300 bytes
// per token plus a few MiB. Rounded up.
inline constexpr uint64_t kVocabBytesPerToken = 320;
inline constexpr uint64_t kModelOverheadBytes = 4ull << 20;

// What loading a model and creating its context will allocate, in bytes.
struct Footprint {
  uint64_t weights = 0;  // model buffers (mapped or read weights, plus repacked copies)
  uint64_t kv = 0;       // context buffers (the KV cache; resident from creation)
  uint64_t compute = 0;  // compute (graph) buffers reserved for the worst-case batch
  uint64_t outputs = 0;  // the logits buffer (not in llama.cpp's breakdown): n_vocab * sequences * 4
  // The vocabulary's heap structures and per-model bookkeeping, which
  // llama.cpp's breakdown does not report either: an estimate calibrated on
  // this tree (kVocabBytesPerToken * n_vocab + kModelOverheadBytes; about
  // 50 MiB for a 152k-token vocabulary, 14 MiB for 32k).
  uint64_t vocabulary = 0;
  uint64_t total() const { return weights + kv + compute + outputs + vocabulary; }
};

// Predicts the footprint of Model::Load(path, load) followed by
// Context::Create(model, context). Reads metadata only, but builds the
// vocabulary: about 0.3 s for a 152k-token one on this machine. On failure
// (no such file, not a GGUF, unsupported architecture, a context llama.cpp
// refuses) returns false and sets *error.
bool PredictFootprint(const std::string& path, const ModelLoadOptions& load, const ContextOptions& context,
                      Footprint* out, std::string* error);

}  // namespace llmux::runtime
