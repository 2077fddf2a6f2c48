// HttpServer: an HTTP/1.1 server on Boost.Beast/Asio.
//
// A small pool of I/O threads runs every connection (each on its own strand);
// handlers marked Dispatch::kWorker run on a separate worker pool so that a
// slow handler never stalls I/O. While a request is being answered the
// connection keeps reading, so a client that disconnects is noticed at once
// (see Exchange::OnClientGone) even before any response byte is written.
//
// Thread-safety: Start/Stop from one controlling thread; everything else is
// internal.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "http/router.h"

namespace llmux::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;                   // 0 = any free port (see port())
  int io_threads = 2;
  int worker_threads = 8;
  uint64_t max_body_bytes = 32ull << 20;  // larger bodies get 413
  uint32_t max_header_bytes = 64 << 10;   // larger headers get 431
  int read_timeout_seconds = 60;          // to receive one whole request
  // Formats an error body (the API's envelope) for errors the HTTP layer
  // answers itself: 400 bad request, 404, 405, 413, 431, 500.
  std::function<std::string(int status, std::string_view code, std::string_view message)> error_body;
};

class HttpServer {
 public:
  HttpServer(ServerOptions options, Router router);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving. False + *error when the address cannot be bound.
  bool Start(std::string* error);
  // The bound port (useful with port 0).
  uint16_t port() const;
  // Stops accepting, closes every connection, joins all threads. Idempotent.
  void Stop();
  int open_connections() const;

  struct Impl;  // implementation detail (server.cc)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmux::http
