#include "engine/stop_matcher.h"

#include <algorithm>

namespace llmux {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Expected length of a sequence from its lead byte; 0 for a byte that cannot lead.
size_t SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Whether the continuation byte at offset 1 is allowed after `lead` (rules out
// overlong forms, surrogates and code points above U+10FFFF).
bool SecondByteOk(unsigned char lead, unsigned char second) {
  if (!IsContinuation(second)) return false;
  if (lead == 0xE0) return second >= 0xA0;
  if (lead == 0xED) return second <= 0x9F;
  if (lead == 0xF0) return second >= 0x90;
  if (lead == 0xF4) return second <= 0x8F;
  return true;
}

}  // namespace

size_t IncompleteUtf8Tail(std::string_view bytes) {
  // A sequence is at most 4 bytes: look back for the last lead byte.
  const size_t n = bytes.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const auto c = static_cast<unsigned char>(bytes[n - back]);
    if (IsContinuation(c)) continue;
    const size_t len = SequenceLength(c);
    if (len <= back) return 0;  // complete (or invalid: not ours to hold)
    if (back >= 2 && !SecondByteOk(c, static_cast<unsigned char>(bytes[n - back + 1]))) return 0;
    return back;
  }
  return 0;
}

std::string SanitizeUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    const size_t len = SequenceLength(lead);
    bool ok = len > 0 && i + len <= bytes.size();
    if (ok && len >= 2) ok = SecondByteOk(lead, static_cast<unsigned char>(bytes[i + 1]));
    for (size_t k = 2; ok && k < len; ++k) ok = IsContinuation(static_cast<unsigned char>(bytes[i + k]));
    if (ok) {
      out.append(bytes.substr(i, len));
      i += len;
    } else {
      out.append(kReplacement);
      ++i;
      while (i < bytes.size() && IsContinuation(static_cast<unsigned char>(bytes[i]))) ++i;
    }
  }
  return out;
}

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

size_t StopMatcher::HeldTailLength(std::string_view buf) const {
  size_t hold = IncompleteUtf8Tail(buf);
  // The longest suffix of buf that is a proper prefix of some stop string.
  for (const std::string& stop : stops_) {
    const size_t max_len = std::min(stop.size() - 1, buf.size());
    for (size_t len = max_len; len > hold; --len) {
      if (buf.substr(buf.size() - len) == std::string_view(stop).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  return hold;
}

std::string StopMatcher::Push(std::string_view bytes) {
  if (stopped_) return {};
  held_.append(bytes);
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = SanitizeUtf8(std::string_view(held_).substr(0, first));
    held_.clear();
    return out;
  }
  const size_t keep = HeldTailLength(held_);
  std::string out = SanitizeUtf8(std::string_view(held_).substr(0, held_.size() - keep));
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::Flush() {
  if (stopped_) return {};
  std::string out = SanitizeUtf8(held_);
  held_.clear();
  return out;
}

}  // namespace llmux
