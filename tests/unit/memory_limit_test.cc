#include "sys/memory_limit.h"

#include <gtest/gtest.h>

namespace llmux::sys {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
using Kind = MemoryLimitSpec::Kind;

MemoryLimitSpec Parse(std::string_view text) {
  std::string error;
  const auto spec = ParseMemoryLimit(text, &error);
  EXPECT_TRUE(spec.has_value()) << text << ": " << error;
  return spec.value_or(MemoryLimitSpec{});
}

MemoryLimitSpec Bytes(uint64_t n) { return {Kind::kBytes, n, 0}; }
MemoryLimitSpec Percent(double p) { return {Kind::kPercent, 0, p}; }
const MemoryLimitSpec kAutoSpec{Kind::kAuto, 0, 0};
const MemoryLimitSpec kDisabledSpec{Kind::kDisabled, 0, 0};

TEST(MemoryLimit, ParsesKeywords) {
  EXPECT_EQ(Parse("auto").kind, Kind::kAuto);
  EXPECT_EQ(Parse("AUTO").kind, Kind::kAuto);
  EXPECT_EQ(Parse(" auto ").kind, Kind::kAuto);
  EXPECT_EQ(Parse("disabled").kind, Kind::kDisabled);
  EXPECT_EQ(Parse("Disabled").kind, Kind::kDisabled);
}

TEST(MemoryLimit, ParsesSizes) {
  const struct {
    const char* text;
    uint64_t bytes;
  } cases[] = {
      {"8GiB", 8 * kGiB},  {"8G", 8 * kGiB},         {"8gb", 8 * kGiB},   {"512MiB", 512 * kMiB},
      {"1.5GiB", 3 * kGiB / 2}, {"1073741824", kGiB}, {"730", 730},       {"1T", 1024 * kGiB},
  };
  for (const auto& c : cases) {
    const MemoryLimitSpec spec = Parse(c.text);
    EXPECT_EQ(spec.kind, Kind::kBytes) << c.text;
    EXPECT_EQ(spec.bytes, c.bytes) << c.text;
  }
}

TEST(MemoryLimit, ParsesPercentages) {
  const struct {
    const char* text;
    double percent;
  } cases[] = {{"1%", 1}, {"50%", 50}, {"12.5%", 12.5}, {"100%", 100}, {" 80% ", 80}, {"80 %", 80}};
  for (const auto& c : cases) {
    const MemoryLimitSpec spec = Parse(c.text);
    EXPECT_EQ(spec.kind, Kind::kPercent) << c.text;
    EXPECT_DOUBLE_EQ(spec.percent, c.percent) << c.text;
  }
}

TEST(MemoryLimit, RejectsBadInput) {
  const char* bad[] = {"",     " ",     "0",      "0GiB", "-1GiB", "0%",    "0.5%", "101%", "%",
                       "50%%", "-5%",   "1.2.3%", "abc",  "8XB",   "8 GiB extra", "autoo", "off", "none",
                       "1e9",  "50% RAM"};
  for (const char* text : bad) {
    std::string error;
    EXPECT_FALSE(ParseMemoryLimit(text, &error).has_value()) << "'" << text << "'";
    // The message says what is accepted.
    EXPECT_NE(error.find("8GiB"), std::string::npos) << error;
    EXPECT_NE(error.find("auto"), std::string::npos) << error;
    EXPECT_NE(error.find("disabled"), std::string::npos) << error;
    EXPECT_NE(error.find("%"), std::string::npos) << error;
  }
}

TEST(MemoryLimit, AutoProcessLimits) {
  // 24 GiB: reserve 20% = 4.8 GiB -> soft 19.2 GiB; hard = max(20, 19.2) = 20 GiB.
  ProcessMemoryLimits l = ResolveProcessLimits(kAutoSpec, 24 * kGiB);
  EXPECT_TRUE(l.enabled);
  EXPECT_EQ(l.soft, 24 * kGiB - 24 * kGiB / 5);
  EXPECT_NEAR(static_cast<double>(l.soft) / kGiB, 19.2, 1e-6);
  EXPECT_EQ(l.hard, 20 * kGiB);

  // 64 GiB: 20% = 12.8 GiB, clamped to 8 GiB -> soft 56; hard 60.
  l = ResolveProcessLimits(kAutoSpec, 64 * kGiB);
  EXPECT_EQ(l.soft, 56 * kGiB);
  EXPECT_EQ(l.hard, 60 * kGiB);

  // 8 GiB: 20% = 1.6 GiB, clamped up to 2 GiB -> soft 6; hard = max(4, 6) = 6.
  l = ResolveProcessLimits(kAutoSpec, 8 * kGiB);
  EXPECT_EQ(l.soft, 6 * kGiB);
  EXPECT_EQ(l.hard, 6 * kGiB);

  // 16 GiB: reserve 3.2 GiB -> soft 12.8 GiB, above RAM - 4 GiB = 12 -> hard = soft.
  l = ResolveProcessLimits(kAutoSpec, 16 * kGiB);
  EXPECT_EQ(l.soft, 16 * kGiB - 16 * kGiB / 5);
  EXPECT_EQ(l.hard, l.soft);
}

TEST(MemoryLimit, AutoProcessLimitsOnTinyMachines) {
  // 4 GiB: reserve 2 GiB (also half the RAM) -> soft 2; RAM - 4 GiB = 0 -> hard = soft.
  ProcessMemoryLimits l = ResolveProcessLimits(kAutoSpec, 4 * kGiB);
  EXPECT_TRUE(l.enabled);
  EXPECT_EQ(l.soft, 2 * kGiB);
  EXPECT_EQ(l.hard, 2 * kGiB);
  // 3 GiB: the 2 GiB reserve is capped at half the RAM -> soft 1.5 GiB.
  l = ResolveProcessLimits(kAutoSpec, 3 * kGiB);
  EXPECT_EQ(l.soft, 3 * kGiB / 2);
  EXPECT_EQ(l.hard, 3 * kGiB / 2);
  // 5 GiB: soft 3; RAM - 4 GiB = 1 < soft -> hard 3.
  l = ResolveProcessLimits(kAutoSpec, 5 * kGiB);
  EXPECT_EQ(l.soft, 3 * kGiB);
  EXPECT_EQ(l.hard, 3 * kGiB);
  // Unknown RAM: auto cannot resolve.
  EXPECT_FALSE(ResolveProcessLimits(kAutoSpec, 0).enabled);
}

TEST(MemoryLimit, PercentAndBytesProcessLimits) {
  ProcessMemoryLimits l = ResolveProcessLimits(Percent(50), 24 * kGiB);
  EXPECT_TRUE(l.enabled);
  EXPECT_EQ(l.soft, 12 * kGiB);
  EXPECT_EQ(l.hard, 20 * kGiB);

  l = ResolveProcessLimits(Percent(100), 24 * kGiB);
  EXPECT_EQ(l.soft, 24 * kGiB);
  EXPECT_EQ(l.hard, 24 * kGiB);  // hard never below soft

  l = ResolveProcessLimits(Percent(12.5), 64 * kGiB);
  EXPECT_EQ(l.soft, 8 * kGiB);
  EXPECT_EQ(l.hard, 60 * kGiB);

  l = ResolveProcessLimits(Bytes(8 * kGiB), 24 * kGiB);
  EXPECT_EQ(l.soft, 8 * kGiB);
  EXPECT_EQ(l.hard, 20 * kGiB);

  // A size above RAM - 4 GiB raises the hard limit with it.
  l = ResolveProcessLimits(Bytes(22 * kGiB), 24 * kGiB);
  EXPECT_EQ(l.soft, 22 * kGiB);
  EXPECT_EQ(l.hard, 22 * kGiB);

  // Unknown RAM: a size still applies, a percentage cannot.
  l = ResolveProcessLimits(Bytes(8 * kGiB), 0);
  EXPECT_TRUE(l.enabled);
  EXPECT_EQ(l.soft, 8 * kGiB);
  EXPECT_EQ(l.hard, 8 * kGiB);
  EXPECT_FALSE(ResolveProcessLimits(Percent(50), 0).enabled);
}

TEST(MemoryLimit, DisabledProcessLimits) {
  const ProcessMemoryLimits l = ResolveProcessLimits(kDisabledSpec, 24 * kGiB);
  EXPECT_FALSE(l.enabled);
  EXPECT_EQ(l.soft, 0u);
  EXPECT_EQ(l.hard, 0u);
}

TEST(MemoryLimit, ModelLimit) {
  const ProcessMemoryLimits process = ResolveProcessLimits(kAutoSpec, 24 * kGiB);
  const ProcessMemoryLimits no_process = ResolveProcessLimits(kDisabledSpec, 24 * kGiB);

  // auto follows the process soft limit, or 90% of RAM without one.
  EXPECT_EQ(ResolveModelLimit(kAutoSpec, 24 * kGiB, process), process.soft);
  EXPECT_EQ(ResolveModelLimit(kAutoSpec, 20 * kGiB, no_process), 18 * kGiB);
  EXPECT_EQ(ResolveModelLimit(kAutoSpec, 0, no_process), std::nullopt);

  EXPECT_EQ(ResolveModelLimit(Bytes(6 * kGiB), 24 * kGiB, process), 6 * kGiB);
  EXPECT_EQ(ResolveModelLimit(Percent(25), 24 * kGiB, process), 6 * kGiB);
  EXPECT_EQ(ResolveModelLimit(Percent(25), 0, process), std::nullopt);

  EXPECT_EQ(ResolveModelLimit(kDisabledSpec, 24 * kGiB, process), std::nullopt);
  EXPECT_EQ(ResolveModelLimit(kDisabledSpec, 24 * kGiB, no_process), std::nullopt);
}

TEST(MemoryLimit, FormatBytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(730), "730 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(512 * kMiB), "512.0 MiB");
  EXPECT_EQ(FormatBytes(3 * kGiB / 2), "1.5 GiB");
  EXPECT_EQ(FormatBytes(24 * kGiB - 24 * kGiB / 5), "19.2 GiB");
  EXPECT_EQ(FormatBytes(kGiB - 1), "1.0 GiB");  // never "1024.0 MiB"
  EXPECT_EQ(FormatBytes(2048 * kGiB), "2.0 TiB");
}

}  // namespace
}  // namespace llmux::sys
