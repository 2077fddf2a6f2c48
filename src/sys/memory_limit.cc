#include "sys/memory_limit.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

#include "sys/byte_size.h"

namespace llmux::sys {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

// "12", "12.5": digits with at most one '.', at least one digit.
std::optional<double> ParseDecimal(std::string_view s) {
  if (s.empty()) return std::nullopt;
  int dots = 0;
  int digits = 0;
  for (char c : s) {
    if (c == '.') {
      ++dots;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      ++digits;
    } else {
      return std::nullopt;
    }
  }
  if (dots > 1 || digits == 0) return std::nullopt;
  double value = 0;  // from_chars: independent of the C locale's decimal point
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

uint64_t PercentOf(uint64_t total, double percent) {
  return static_cast<uint64_t>(std::llround(static_cast<double>(total) * percent / 100.0));
}

}  // namespace

std::optional<MemoryLimitSpec> ParseMemoryLimit(std::string_view text, std::string* error) {
  const std::string_view s = Trim(text);
  MemoryLimitSpec spec;
  if (EqualsIgnoreCase(s, "auto")) {
    spec.kind = MemoryLimitSpec::Kind::kAuto;
    return spec;
  }
  if (EqualsIgnoreCase(s, "disabled")) {
    spec.kind = MemoryLimitSpec::Kind::kDisabled;
    return spec;
  }
  if (!s.empty() && s.back() == '%') {
    const std::optional<double> percent = ParseDecimal(Trim(s.substr(0, s.size() - 1)));
    if (percent && *percent >= 1 && *percent <= 100) {
      spec.kind = MemoryLimitSpec::Kind::kPercent;
      spec.percent = *percent;
      return spec;
    }
  } else if (const std::optional<uint64_t> bytes = ParseByteSize(s); bytes && *bytes > 0) {
    spec.kind = MemoryLimitSpec::Kind::kBytes;
    spec.bytes = *bytes;
    return spec;
  }
  // Appended piecewise: GCC 12 warns (-Wrestrict, falsely) on "'" + std::string(...).
  std::string message = "'";
  message.append(text);
  message.append(
      "' is not a memory limit: expected a size such as 8GiB or 512MiB, a percentage of RAM "
      "from 1% to 100%, 'auto' or 'disabled'");
  *error = std::move(message);
  return std::nullopt;
}

ProcessMemoryLimits ResolveProcessLimits(const MemoryLimitSpec& spec, uint64_t total_ram) {
  ProcessMemoryLimits limits;
  switch (spec.kind) {
    case MemoryLimitSpec::Kind::kDisabled:
      return limits;
    case MemoryLimitSpec::Kind::kAuto: {
      if (total_ram == 0) return limits;
      const uint64_t reserve = std::min(std::clamp(total_ram / 5, 2 * kGiB, 8 * kGiB), total_ram / 2);
      limits.soft = total_ram - reserve;
      break;
    }
    case MemoryLimitSpec::Kind::kPercent:
      if (total_ram == 0) return limits;
      limits.soft = PercentOf(total_ram, spec.percent);
      break;
    case MemoryLimitSpec::Kind::kBytes:
      limits.soft = spec.bytes;
      break;
  }
  const uint64_t ram_less_reserve = total_ram > 4 * kGiB ? total_ram - 4 * kGiB : 0;
  limits.hard = std::max(ram_less_reserve, limits.soft);
  limits.enabled = true;
  return limits;
}

std::optional<uint64_t> ResolveModelLimit(const MemoryLimitSpec& spec, uint64_t total_ram,
                                          const ProcessMemoryLimits& process) {
  switch (spec.kind) {
    case MemoryLimitSpec::Kind::kDisabled:
      return std::nullopt;
    case MemoryLimitSpec::Kind::kAuto:
      if (process.enabled) return process.soft;
      if (total_ram == 0) return std::nullopt;
      return PercentOf(total_ram, 90);
    case MemoryLimitSpec::Kind::kPercent:
      if (total_ram == 0) return std::nullopt;
      return PercentOf(total_ram, spec.percent);
    case MemoryLimitSpec::Kind::kBytes:
      return spec.bytes;
  }
  return std::nullopt;
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  // Move up while the value would print as 1024.0 or more.
  while (value >= 1023.95 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", value, kUnits[unit]);
  return buf;
}

}  // namespace llmux::sys
