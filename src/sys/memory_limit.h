// Memory limits as given on the command line, and how they resolve against the
// machine's RAM.
//
//   --max-process-memory  what the whole process may hold (RSS). A soft limit
//                         the pool keeps to by evicting, and a hard limit it
//                         never crosses.
//   --max-model-memory    the sum of the loaded models' footprints
//                         (runtime/footprint.h), used for load admission.
//
// Pure functions of their arguments (RAM is passed in, not read here), so they
// are safe to call from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace llmux::sys {

// A memory limit as given on the command line: "SIZE" (e.g. 8GiB, see
// sys/byte_size.h ParseByteSize), "NN%" (1..100 % of RAM), "auto" or "disabled".
struct MemoryLimitSpec {
  enum class Kind { kBytes, kPercent, kAuto, kDisabled } kind = Kind::kAuto;
  uint64_t bytes = 0;   // kBytes: > 0
  double percent = 0;   // kPercent: in [1, 100]
};

// Accepts "auto", "disabled" (either in any letter case), a positive size
// ("8GiB", "512M", "1073741824") or a percentage "NN%" / "NN.N%" in [1, 100].
// Surrounding blanks are ignored. On anything else returns nullopt and sets
// *error to a message that says what is accepted.
std::optional<MemoryLimitSpec> ParseMemoryLimit(std::string_view text, std::string* error);

struct ProcessMemoryLimits {
  uint64_t soft = 0;  // evict above this
  uint64_t hard = 0;  // never exceed; always >= soft
  bool enabled = false;
};

// --max-process-memory against `total_ram` bytes:
//   auto     soft = RAM - clamp(20% of RAM, 2 GiB, 8 GiB)
//   NN%      soft = NN% of RAM
//   SIZE     soft = SIZE
//   and then hard = max(RAM - 4 GiB, soft).
//   disabled enabled = false.
// Small machines: the auto reserve is at most half the RAM (so soft >= RAM/2;
// this only bites below 4 GiB), and RAM - 4 GiB saturates at 0 (hard = soft
// when RAM <= 4 GiB). When total_ram is 0 (unknown), auto and NN% resolve to
// disabled; SIZE still applies with hard = soft.
ProcessMemoryLimits ResolveProcessLimits(const MemoryLimitSpec& spec, uint64_t total_ram);

// --max-model-memory (the sum of loaded models' footprints):
//   auto     the process soft limit, or 90% of RAM when the process limit is disabled
//   NN%      NN% of RAM
//   SIZE     SIZE
//   disabled nullopt.
// When total_ram is 0 (unknown), what needs RAM (NN%, auto without a process
// limit) resolves to nullopt.
std::optional<uint64_t> ResolveModelLimit(const MemoryLimitSpec& spec, uint64_t total_ram,
                                          const ProcessMemoryLimits& process);

// Human-readable binary size for messages: "730 B", "1.5 KiB", "512.0 MiB",
// "1.5 GiB", "2.0 TiB" (one decimal, rounded).
std::string FormatBytes(uint64_t bytes);

}  // namespace llmux::sys
