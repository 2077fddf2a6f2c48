#include "api/generation_call.h"

#include "api/api_error.h"
#include "api/pool_errors.h"
#include "engine/engine.h"
#include "http/sse.h"

namespace llmux::api {

GenerationCall::GenerationCall(std::shared_ptr<http::Exchange> exchange, Lease lease, Format format)
    : exchange_(std::move(exchange)), lease_(std::move(lease)), format_(std::move(format)) {}

void GenerationCall::Start(std::shared_ptr<http::Exchange> exchange, Lease lease, GenerationRequest request,
                           Format format) {
  auto call = std::make_shared<GenerationCall>(exchange, std::move(lease), std::move(format));
  if (call->format_.stream) {
    exchange->StartEventStream();
    if (call->format_.identity.kind == CompletionKind::kChat) {
      exchange->SendEvent(http::SseData(Dump(RoleChunk(call->format_.identity, call->format_.include_usage))));
    }
  }
  call->stream_ = call->lease_->engine().Submit(std::move(request));
  std::weak_ptr<GenerationCall> weak = call;
  exchange->OnClientGone([weak] {
    if (auto c = weak.lock()) c->Cancel();
  });
  // The listener keeps the call alive until the stream has finished and been drained.
  call->stream_->SetListener([call] { call->exchange_->Post([call] { call->Drain(); }); });
}

void GenerationCall::Cancel() {
  if (!ended_ && lease_) lease_->engine().Cancel(stream_->request_id());
}

void GenerationCall::Drain() {
  if (ended_) return;
  TokenStream::Output out = stream_->Take();
  if (!out.text.empty()) {
    if (format_.stream) {
      exchange_->SendEvent(http::SseData(Dump(TextChunk(format_.identity, out.text, format_.include_usage))));
    } else {
      text_.append(out.text);
    }
  }
  if (out.completion) Finish(*out.completion);
}

void GenerationCall::Finish(const Completion& c) {
  ended_ = true;
  const bool ok = c.reason == FinishReason::kStop || c.reason == FinishReason::kLength;
  if (ok) {
    if (format_.stream) {
      exchange_->SendEvent(http::SseData(Dump(FinishChunk(format_.identity, c, format_.include_usage))));
      if (format_.include_usage) exchange_->SendEvent(http::SseData(Dump(UsageChunk(format_.identity, c))));
      exchange_->SendEvent(http::SseData("[DONE]"));
      exchange_->EndEventStream();
    } else {
      exchange_->Reply(200, "application/json", Dump(CompletionJson(format_.identity, text_, c)));
    }
  } else {
    // Cancelled by the server (unload, shutdown) or failed (engine, memory
    // enforcer): the client gets a terminal error, never silence. A client
    // that left gets nothing.
    const ApiError e = CompletionError(c);
    if (format_.stream) {
      exchange_->SendEvent(http::SseData(e.Body()));
      exchange_->SendEvent(http::SseData("[DONE]"));
      exchange_->EndEventStream();
    } else {
      exchange_->Reply(e.status, "application/json", e.Body());
    }
  }
  // The response has ended: drop the listener (which holds this call) and the lease.
  stream_->ClearListener();
  lease_.reset();
}

}  // namespace llmux::api
