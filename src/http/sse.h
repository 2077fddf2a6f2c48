// Server-sent events framing (text/event-stream).
#pragma once

#include <string>
#include <string_view>

namespace llmux::http {

// "data: <payload>\n\n". A payload with line breaks becomes several data
// lines, which a client joins back with "\n".
std::string SseData(std::string_view payload);
// "event: <name>\ndata: <payload>\n\n".
std::string SseEvent(std::string_view name, std::string_view payload);
// ": <text>\n\n", a comment that clients ignore (keep-alive).
std::string SseComment(std::string_view text);

}  // namespace llmux::http
