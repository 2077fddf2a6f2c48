// HttpRequest: one parsed HTTP request, independent of the HTTP library.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace llmux::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query string, e.g. "/v1/models"
  std::string query;   // after '?', undecoded
  std::map<std::string, std::string> headers;      // names lower-cased
  std::map<std::string, std::string> path_params;  // values of {name} route segments
  std::string body;
  std::string remote;  // peer address

  // Header value, or "" when absent. `name` must be lower-case.
  std::string header(std::string_view name) const {
    auto it = headers.find(std::string(name));
    return it == headers.end() ? std::string() : it->second;
  }
};

}  // namespace llmux::http
