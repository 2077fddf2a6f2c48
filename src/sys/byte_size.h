// Parsing of byte sizes given on the command line: "1048576", "512K",
// "32MiB", "1.5G". Units are binary (K = KiB = 1024); a trailing "B" is optional.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace llmux::sys {

std::optional<uint64_t> ParseByteSize(std::string_view text);

}  // namespace llmux::sys
