#include "sys/byte_size.h"

#include <cctype>
#include <cmath>
#include <string>

namespace llmux::sys {

std::optional<uint64_t> ParseByteSize(std::string_view text) {
  std::string s(text);
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return std::nullopt;
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(s.substr(0, i), &used);
    if (used != i) return std::nullopt;
  } catch (...) {
    return std::nullopt;
  }
  std::string unit;
  for (size_t k = i; k < s.size(); ++k) {
    if (!std::isspace(static_cast<unsigned char>(s[k]))) unit += static_cast<char>(std::toupper(static_cast<unsigned char>(s[k])));
  }
  if (!unit.empty() && unit.back() == 'B') unit.pop_back();
  if (!unit.empty() && unit.back() == 'I') unit.pop_back();
  double scale = 1;
  if (unit.empty()) {
    scale = 1;
  } else if (unit == "K") {
    scale = 1024.0;
  } else if (unit == "M") {
    scale = 1024.0 * 1024;
  } else if (unit == "G") {
    scale = 1024.0 * 1024 * 1024;
  } else if (unit == "T") {
    scale = 1024.0 * 1024 * 1024 * 1024;
  } else {
    return std::nullopt;
  }
  const double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 0 || bytes > 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(std::llround(bytes));
}

}  // namespace llmux::sys
