// The fingerprint of a model's KV: what a prefix-cache block of this model
// is tied to, so that two models never share blocks.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmux::runtime {

// Fingerprint of a model's KV: SHA-256 over, in order,
//   "llmux-model-fingerprint-v1";
//   every metadata key/type/value of the GGUF, in file order (values in a
//   canonical little-endian encoding; arrays element by element; strings
//   length-prefixed);
//   every tensor's name, type and shape (all GGML_MAX_DIMS extents);
//   the size of the data region (data offset to end of file) and a checksum
//   of its contents (see below);
//   `kv_format`: the caller's description of the KV settings, e.g.
//   "k=f16 v=f16 fa=auto unified=1".
// Never the file path: a copy of the file at another path has the same
// fingerprint.
//
// The data checksum: models made with the same architecture, shapes and
// vocabulary (fine-tunes, other seeds) have identical headers, so the header
// alone would let them share blocks. The tensor data is therefore sampled:
// XXH3-64 over the first and last 1 MiB of the data region plus 64 evenly
// spaced 4 KiB windows (the whole region when it is smaller than 2.25 MiB),
// read with pread: about 2.3 MiB of I/O even for a 10 GB file. It is a
// checksum of the content, so it stays path-independent.
//
// Reads only the header (gguf_init_from_file with no_alloc) and those
// samples. False + *error when the file is not a readable GGUF.
bool ModelFingerprint(const std::string& gguf_path, std::string_view kv_format, std::array<uint8_t, 32>* out,
                      std::string* error);

}  // namespace llmux::runtime
