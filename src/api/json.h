// The JSON library llmux uses: the nlohmann/json copy vendored by llama.cpp
// (llama-common links the same one), plus a dump that never throws.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace llmux::api {

using Json = nlohmann::ordered_json;

// Compact JSON text; invalid UTF-8 in strings becomes U+FFFD instead of throwing.
inline std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace llmux::api
