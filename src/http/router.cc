#include "http/router.h"

namespace llmux::http {
namespace {

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = path.find('/', start);
    const std::string_view seg = path.substr(start, end == std::string_view::npos ? end : end - start);
    if (!seg.empty()) out.push_back(seg);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

bool IsParam(const std::string& seg) { return seg.size() > 2 && seg.front() == '{' && seg.back() == '}'; }

}  // namespace

void Router::Add(std::string method, std::string pattern, Dispatch dispatch, Handler handler) {
  Route r;
  r.method = std::move(method);
  for (std::string_view s : Split(pattern)) r.segments.emplace_back(s);
  r.dispatch = dispatch;
  r.handler = std::move(handler);
  routes_.push_back(std::move(r));
}

Router::Match Router::Find(std::string_view method, std::string_view path) const {
  Match m;
  const std::vector<std::string_view> segs = Split(path);
  for (const Route& r : routes_) {
    if (r.segments.size() != segs.size()) continue;
    std::vector<std::pair<std::string, std::string>> params;
    bool ok = true;
    for (size_t i = 0; i < segs.size() && ok; ++i) {
      if (IsParam(r.segments[i])) {
        params.emplace_back(r.segments[i].substr(1, r.segments[i].size() - 2), std::string(segs[i]));
      } else {
        ok = r.segments[i] == segs[i];
      }
    }
    if (!ok) continue;
    m.path_exists = true;
    if (r.method != method) continue;
    m.handler = &r.handler;
    m.dispatch = r.dispatch;
    m.params = std::move(params);
    return m;
  }
  return m;
}

}  // namespace llmux::http
