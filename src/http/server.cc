#include "http/server.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>  // before asio: boost 1.74 awaitable.hpp needs std::exchange
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

namespace llmux::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

constexpr size_t kMaxPipelinedBytes = 1 << 20;  // stop watching past this much unread input
constexpr int kLingerSeconds = 5;               // how long a closing connection drains input

const char* Reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 507: return "Insufficient Storage";
    default: return "Status";
  }
}

std::string Head(int status, std::string_view content_type, std::optional<size_t> content_length, bool keep_alive,
                 const Headers& extra) {
  std::string h;
  h.reserve(256);
  h.append("HTTP/1.1 ").append(std::to_string(status)).append(" ").append(Reason(status)).append("\r\n");
  h.append("Server: llmux\r\n");
  if (!content_type.empty()) h.append("Content-Type: ").append(content_type).append("\r\n");
  if (content_length) {
    h.append("Content-Length: ").append(std::to_string(*content_length)).append("\r\n");
  } else {
    h.append("Transfer-Encoding: chunked\r\n");
  }
  h.append(keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n");
  for (const auto& [name, value] : extra) h.append(name).append(": ").append(value).append("\r\n");
  h.append("\r\n");
  return h;
}

std::string Chunk(std::string_view data) {
  char size[20];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out;
  out.reserve(data.size() + static_cast<size_t>(n) + 2);
  out.append(size, static_cast<size_t>(n)).append(data).append("\r\n");
  return out;
}

std::string_view View(boost::beast::string_view s) { return {s.data(), s.size()}; }

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

class Session;

// --- ExchangeImpl: the handler's view of one request on a Session. ---------

class ExchangeImpl final : public Exchange, public std::enable_shared_from_this<ExchangeImpl> {
 public:
  ExchangeImpl(std::shared_ptr<Session> session, HttpRequest request, bool keep_alive)
      : session_(std::move(session)), request_(std::move(request)), keep_alive_(keep_alive) {}
  ~ExchangeImpl() override;

  const HttpRequest& request() const override { return request_; }
  void Reply(int status, std::string_view content_type, std::string body, Headers extra) override;
  void StartEventStream(Headers extra) override;
  void SendEvent(std::string frame) override;
  void EndEventStream() override;
  void OnClientGone(std::function<void()> callback) override;
  bool client_gone() const override { return gone_.load(); }
  void Post(std::function<void()> fn) override;
  void PostWork(std::function<void()> fn) override;

  // Strand only.
  void NotifyGone();

 private:
  enum State { kNew, kStreaming, kDone };
  void Write(std::string bytes, bool last);

  std::shared_ptr<Session> session_;
  HttpRequest request_;
  const bool keep_alive_;
  std::atomic<int> state_{kNew};
  std::atomic<bool> gone_{false};
  std::vector<std::function<void()>> gone_callbacks_;  // strand only
};

// --- Session: one TCP connection. All members are used on its strand. ------

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server);
  ~Session();
  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }
  void Close() {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->ClientGone(); });
  }
  net::any_io_executor executor() { return stream_.get_executor(); }
  void PostWork(std::function<void()> fn);
  // Queues response bytes; `last` ends the response.
  void Write(std::string bytes, bool last);
  bool gone() const { return gone_; }
  const ServerOptions& options() const;

 private:
  enum class State { kReading, kHandling, kDraining, kClosed };

  void ReadHeader();
  void OnHeader(beast::error_code ec);
  void OnBody(beast::error_code ec);
  void Dispatch();
  void Watch();
  void OnWatch(beast::error_code ec, size_t n);
  void DoWrite();
  void OnWrite(beast::error_code ec);
  void ResponseEnded();
  void ReplyAndClose(int status, std::string_view code, std::string_view message);
  void BodyTooLarge();
  void ClientGone();
  void Linger();
  void CloseNow();

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  HttpServer::Impl& server_;
  State state_ = State::kReading;
  bool keep_alive_ = true;
  bool watching_ = false;
  bool gone_ = false;
  bool writing_ = false;
  bool last_queued_ = false;
  std::deque<std::string> pending_;
  std::string writing_buf_;
  std::weak_ptr<ExchangeImpl> exchange_;
  std::array<char, 4096> linger_buf_{};
};

struct HttpServer::Impl {
  ServerOptions options;
  Router router;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::unique_ptr<net::thread_pool> workers;
  std::vector<std::thread> io_threads;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::mutex sessions_mu;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;
  std::atomic<bool> stopping{false};
  bool started = false;

  Impl(ServerOptions o, Router r) : options(std::move(o)), router(std::move(r)) {}

  std::string ErrorBody(int status, std::string_view code, std::string_view message) const {
    if (options.error_body) return options.error_body(status, code, message);
    return std::string(message);
  }

  void Accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (!stopping.load()) {
          spdlog::warn("http: accept failed: {}", ec.message());
          Accept();
        }
        return;
      }
      auto session = std::make_shared<Session>(std::move(socket), *this);
      {
        std::lock_guard<std::mutex> lock(sessions_mu);
        sessions.emplace(session.get(), session);
      }
      session->Start();
      Accept();
    });
  }
};

const ServerOptions& Session::options() const { return server_.options; }

void Session::PostWork(std::function<void()> fn) { net::post(*server_.workers, std::move(fn)); }

Session::Session(tcp::socket socket, HttpServer::Impl& server) : stream_(std::move(socket)), server_(server) {}

Session::~Session() {
  std::lock_guard<std::mutex> lock(server_.sessions_mu);
  server_.sessions.erase(this);
}

void Session::ReadHeader() {
  if (state_ == State::kClosed) return;
  state_ = State::kReading;
  parser_.emplace();
  parser_->body_limit(server_.options.max_body_bytes);
  parser_->header_limit(server_.options.max_header_bytes);
  stream_.expires_after(std::chrono::seconds(server_.options.read_timeout_seconds));
  bhttp::async_read_header(stream_, buffer_, *parser_,
                           [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

void Session::OnHeader(beast::error_code ec) {
  if (ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset) {
    return CloseNow();
  }
  if (ec == bhttp::error::header_limit) return ReplyAndClose(431, "headers_too_large", "request headers are too large");
  // A declared Content-Length over the limit fails here, before any body byte is read.
  if (ec == bhttp::error::body_limit) return BodyTooLarge();
  if (ec) return ReplyAndClose(400, "bad_request", "malformed HTTP request: " + ec.message());
  if (parser_->is_done()) return Dispatch();
  auto read_body = [self = shared_from_this()] {
    bhttp::async_read(self->stream_, self->buffer_, *self->parser_,
                      [self](beast::error_code ec2, size_t) { self->OnBody(ec2); });
  };
  if (Lower(View(parser_->get()[bhttp::field::expect])) == "100-continue") {
    auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    net::async_write(stream_, net::buffer(*cont), [self = shared_from_this(), cont, read_body](beast::error_code ec2, size_t) {
      if (ec2) return self->CloseNow();
      read_body();
    });
    return;
  }
  read_body();
}

void Session::BodyTooLarge() {
  ReplyAndClose(413, "request_too_large",
                "request body exceeds the limit of " + std::to_string(server_.options.max_body_bytes) + " bytes");
}

void Session::OnBody(beast::error_code ec) {
  if (ec == bhttp::error::body_limit) return BodyTooLarge();
  if (ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
      ec == net::error::connection_reset || ec == net::error::operation_aborted) {
    return CloseNow();
  }
  if (ec) return ReplyAndClose(400, "bad_request", "malformed HTTP request body: " + ec.message());
  Dispatch();
}

void Session::Dispatch() {
  stream_.expires_never();
  bhttp::request<bhttp::string_body> msg = parser_->release();
  parser_.reset();
  HttpRequest req;
  req.method = std::string(View(msg.method_string()));
  const std::string_view target = View(msg.target());
  const size_t q = target.find('?');
  req.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) req.query = std::string(target.substr(q + 1));
  for (const auto& field : msg) req.headers[Lower(View(field.name_string()))] = std::string(View(field.value()));
  req.body = std::move(msg.body());
  beast::error_code ec;
  const auto ep = stream_.socket().remote_endpoint(ec);
  if (!ec) req.remote = ep.address().to_string();
  keep_alive_ = msg.keep_alive() && !server_.stopping.load();
  state_ = State::kHandling;
  last_queued_ = false;

  Router::Match match = server_.router.Find(req.method, req.path);
  for (auto& [k, v] : match.params) req.path_params[k] = v;
  auto exchange = std::make_shared<ExchangeImpl>(shared_from_this(), std::move(req), keep_alive_);
  exchange_ = exchange;
  Watch();
  if (match.handler == nullptr) {
    const int status = match.path_exists ? 405 : 404;
    const std::string& path = exchange->request().path;
    const std::string message = match.path_exists
                                    ? "method " + exchange->request().method + " is not allowed on " + path
                                    : "no route for " + exchange->request().method + " " + path;
    exchange->Reply(status, "application/json",
                    server_.ErrorBody(status, status == 405 ? "method_not_allowed" : "route_not_found", message), {});
    return;
  }
  const Handler* handler = match.handler;
  auto run = [handler, exchange, this] {
    try {
      (*handler)(exchange);
    } catch (const std::exception& e) {
      spdlog::error("http: handler for {} {} threw: {}", exchange->request().method, exchange->request().path, e.what());
      exchange->Reply(500, "application/json", server_.ErrorBody(500, "internal_error", "internal server error"), {});
    }
  };
  if (match.dispatch == Dispatch::kWorker) {
    net::post(*server_.workers, std::move(run));
  } else {
    run();
  }
}

// While a request is being answered, keep a read pending so that a client
// that disconnects is noticed at once.
void Session::Watch() {
  if (watching_ || gone_ || buffer_.size() >= kMaxPipelinedBytes) return;
  watching_ = true;
  stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->OnWatch(ec, n);
  });
}

void Session::OnWatch(beast::error_code ec, size_t n) {
  watching_ = false;
  if (!ec) {
    buffer_.commit(n);  // a pipelined request: parsed after this response
    if (state_ == State::kHandling) return Watch();
    if (state_ == State::kDraining) return ReadHeader();
    return;
  }
  if (ec == net::error::operation_aborted) {
    if (state_ == State::kDraining) ReadHeader();
    return;
  }
  // EOF or a reset: the client is gone.
  if (state_ == State::kHandling) return ClientGone();
  CloseNow();
}

void Session::Write(std::string bytes, bool last) {
  if (gone_ || state_ != State::kHandling || last_queued_) return;
  pending_.push_back(std::move(bytes));
  if (last) last_queued_ = true;
  if (!writing_) DoWrite();
}

void Session::DoWrite() {
  writing_buf_.clear();
  for (std::string& s : pending_) writing_buf_.append(s);
  pending_.clear();
  writing_ = true;
  net::async_write(stream_, net::buffer(writing_buf_),
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
}

void Session::OnWrite(beast::error_code ec) {
  writing_ = false;
  if (ec) return ClientGone();
  if (!pending_.empty()) return DoWrite();
  if (last_queued_) ResponseEnded();
}

void Session::ResponseEnded() {
  exchange_.reset();
  if (!keep_alive_ || server_.stopping.load()) return Linger();
  if (watching_) {
    state_ = State::kDraining;
    stream_.cancel();  // OnWatch then reads the next request
    return;
  }
  ReadHeader();
}

void Session::ReplyAndClose(int status, std::string_view code, std::string_view message) {
  state_ = State::kHandling;
  keep_alive_ = false;
  last_queued_ = false;
  const std::string body = server_.ErrorBody(status, code, message);
  Write(Head(status, "application/json", body.size(), false, {}) + body, true);
}

void Session::ClientGone() {
  if (gone_) return;
  gone_ = true;
  if (auto ex = exchange_.lock()) ex->NotifyGone();
  pending_.clear();
  CloseNow();
}

// Closes after the client has seen the response: stop sending, read (and
// drop) what the client may still be sending, then close. Closing at once
// could reset the connection before the client reads an error response.
void Session::Linger() {
  state_ = State::kClosed;
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.expires_after(std::chrono::seconds(kLingerSeconds));
  stream_.async_read_some(net::buffer(linger_buf_), [self = shared_from_this()](beast::error_code ec2, size_t) {
    if (ec2) return self->CloseNow();
    self->Linger();
  });
}

void Session::CloseNow() {
  state_ = State::kClosed;
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.socket().close(ec);
}

// --- ExchangeImpl ------------------------------------------------------------

ExchangeImpl::~ExchangeImpl() {
  const int state = state_.load();
  if (state == kDone) return;
  // Never answered, or a stream never ended: finish it so the connection is not left hanging.
  auto session = session_;
  if (state == kNew) {
    const std::string body = R"({"error":{"message":"internal server error: no response","type":"server_error","param":null,"code":"internal_error"}})";
    std::string bytes = Head(500, "application/json", body.size(), false, {}) + body;
    net::post(session->executor(), [session, bytes = std::move(bytes)]() mutable { session->Write(std::move(bytes), true); });
  } else {
    net::post(session->executor(), [session] { session->Write("0\r\n\r\n", true); });
  }
}

void ExchangeImpl::Write(std::string bytes, bool last) {
  net::post(session_->executor(), [session = session_, bytes = std::move(bytes), last]() mutable {
    session->Write(std::move(bytes), last);
  });
}

void ExchangeImpl::Reply(int status, std::string_view content_type, std::string body, Headers extra) {
  int expected = kNew;
  if (!state_.compare_exchange_strong(expected, kDone)) {
    spdlog::error("http: second answer to {} {} dropped", request_.method, request_.path);
    return;
  }
  std::string bytes = Head(status, content_type, body.size(), keep_alive_, extra);
  bytes.append(body);
  Write(std::move(bytes), true);
}

void ExchangeImpl::StartEventStream(Headers extra) {
  int expected = kNew;
  if (!state_.compare_exchange_strong(expected, kStreaming)) return;
  extra.emplace_back("Cache-Control", "no-cache");
  extra.emplace_back("X-Accel-Buffering", "no");
  Write(Head(200, "text/event-stream", std::nullopt, keep_alive_, extra), false);
}

void ExchangeImpl::SendEvent(std::string frame) {
  if (state_.load() != kStreaming || frame.empty()) return;
  Write(Chunk(frame), false);
}

void ExchangeImpl::EndEventStream() {
  int expected = kStreaming;
  if (!state_.compare_exchange_strong(expected, kDone)) return;
  Write("0\r\n\r\n", true);
}

void ExchangeImpl::OnClientGone(std::function<void()> callback) {
  net::post(session_->executor(), [self = shared_from_this(), callback = std::move(callback)]() mutable {
    if (self->gone_.load() || self->session_->gone()) {
      callback();
    } else {
      self->gone_callbacks_.push_back(std::move(callback));
    }
  });
}

void ExchangeImpl::Post(std::function<void()> fn) { net::post(session_->executor(), std::move(fn)); }

void ExchangeImpl::PostWork(std::function<void()> fn) { session_->PostWork(std::move(fn)); }

void ExchangeImpl::NotifyGone() {
  gone_ = true;
  std::vector<std::function<void()>> callbacks;
  callbacks.swap(gone_callbacks_);
  for (auto& cb : callbacks) cb();
}

// --- HttpServer --------------------------------------------------------------

HttpServer::HttpServer(ServerOptions options, Router router)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(router))) {}

HttpServer::~HttpServer() { Stop(); }

bool HttpServer::Start(std::string* error) {
  beast::error_code ec;
  const auto address = net::ip::make_address(impl_->options.host, ec);
  if (ec) {
    *error = "invalid --host '" + impl_->options.host + "': " + ec.message();
    return false;
  }
  const tcp::endpoint endpoint(address, impl_->options.port);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    *error = "cannot listen on " + impl_->options.host + ":" + std::to_string(impl_->options.port) + ": " + ec.message();
    return false;
  }
  impl_->workers = std::make_unique<net::thread_pool>(static_cast<size_t>(std::max(1, impl_->options.worker_threads)));
  impl_->work.emplace(impl_->ioc.get_executor());
  impl_->Accept();
  for (int i = 0; i < std::max(1, impl_->options.io_threads); ++i) {
    impl_->io_threads.emplace_back([this] { impl_->ioc.run(); });
  }
  impl_->started = true;
  return true;
}

uint16_t HttpServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void HttpServer::Stop() {
  if (!impl_->started) return;
  impl_->started = false;
  impl_->stopping = true;
  net::post(impl_->ioc, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard<std::mutex> lock(impl_->sessions_mu);
    for (auto& [ptr, weak] : impl_->sessions) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) s->Close();
  live.clear();
  impl_->workers->join();
  impl_->work.reset();
  impl_->ioc.stop();
  for (std::thread& t : impl_->io_threads) t.join();
  impl_->io_threads.clear();
}

int HttpServer::open_connections() const {
  std::lock_guard<std::mutex> lock(impl_->sessions_mu);
  return static_cast<int>(impl_->sessions.size());
}

}  // namespace llmux::http
