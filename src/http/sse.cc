#include "http/sse.h"

namespace llmux::http {
namespace {

void AppendField(std::string& out, std::string_view field, std::string_view value) {
  // Each line of `value` becomes one "field: line". CR, LF and CRLF all end a line.
  size_t start = 0;
  while (true) {
    const size_t end = value.find_first_of("\r\n", start);
    out.append(field).append(": ").append(value.substr(start, end - start)).append("\n");
    if (end == std::string_view::npos) break;
    start = end + ((value[end] == '\r' && end + 1 < value.size() && value[end + 1] == '\n') ? 2 : 1);
  }
}

}  // namespace

std::string SseData(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  AppendField(out, "data", payload);
  out.append("\n");
  return out;
}

std::string SseEvent(std::string_view name, std::string_view payload) {
  std::string out;
  AppendField(out, "event", name);
  AppendField(out, "data", payload);
  out.append("\n");
  return out;
}

std::string SseComment(std::string_view text) {
  std::string out;
  AppendField(out, "", text);  // ": text"
  out.append("\n");
  return out;
}

}  // namespace llmux::http
