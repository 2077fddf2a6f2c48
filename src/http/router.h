// Router: maps (method, path) to a handler. Paths are literal segments or
// "{name}" segments, whose values land in HttpRequest::path_params.
//
// Thread-safety: built before the server starts; Find() is const and may run
// on any thread afterwards.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/exchange.h"

namespace llmux::http {

using Handler = std::function<void(std::shared_ptr<Exchange>)>;

// Where a handler runs. kInline: on the connection's I/O thread, for handlers
// that answer from memory in microseconds. kWorker: on the worker pool, for
// handlers that may block (loading a model, tokenizing a long prompt).
enum class Dispatch { kInline, kWorker };

class Router {
 public:
  void Add(std::string method, std::string pattern, Dispatch dispatch, Handler handler);

  struct Match {
    const Handler* handler = nullptr;  // null: no route
    Dispatch dispatch = Dispatch::kInline;
    bool path_exists = false;          // the path matched under another method (405)
    std::vector<std::pair<std::string, std::string>> params;
  };
  Match Find(std::string_view method, std::string_view path) const;

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;
    Dispatch dispatch;
    Handler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace llmux::http
