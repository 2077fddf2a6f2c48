// Exchange: the response side of one HTTP request, as handlers see it.
//
// A handler answers exactly once: either Reply(), or StartEventStream() +
// SendEvent()* + EndEventStream(). Writes go out in call order. If the
// client disconnects before the response has ended, the OnClientGone
// callback runs once (on an I/O thread) and later writes are dropped.
// An Exchange destroyed without an answer replies 500 by itself.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "http/http_request.h"

namespace llmux::http {

class Exchange {
 public:
  virtual ~Exchange() = default;

  virtual const HttpRequest& request() const = 0;

  // A complete response with a body.
  virtual void Reply(int status, std::string_view content_type, std::string body, Headers extra = {}) = 0;
  // Starts a text/event-stream response (status 200, chunked).
  virtual void StartEventStream(Headers extra = {}) = 0;
  // Sends bytes of an event stream (already framed, see sse.h).
  virtual void SendEvent(std::string frame) = 0;
  virtual void EndEventStream() = 0;

  // `callback` runs once if the client goes away before the response ended;
  // at once (posted) if it already has.
  virtual void OnClientGone(std::function<void()> callback) = 0;
  virtual bool client_gone() const = 0;
  // Runs `fn` on this exchange's connection strand (serialised with its I/O).
  virtual void Post(std::function<void()> fn) = 0;
  // Runs `fn` on the server's worker pool (for work that may block).
  virtual void PostWork(std::function<void()> fn) = 0;
};

}  // namespace llmux::http
