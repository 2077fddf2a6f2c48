// GenerationCall: serves one generation to one HTTP client.
//
// It owns the request's Lease from submission until the response has ended,
// on every path: completed, failed, cancelled, or the client gone. It moves
// the engine's output (TokenStream) to the client as one JSON response or as
// an OpenAI event stream, on the connection's strand. A client that
// disconnects has its request cancelled in the engine at once.
//
// Thread-safety: Start() once from any thread; afterwards the call runs on
// the exchange's strand and keeps itself alive until the response ends.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "api/openai_response.h"
#include "engine/generation.h"
#include "engine/token_stream.h"
#include "http/exchange.h"
#include "pool/lease.h"

namespace llmux::api {

class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
 public:
  struct Format {
    ResponseIdentity identity;
    bool stream = false;
    bool include_usage = false;
  };

  // Submits `request` to the leased engine and answers `exchange` with its output.
  static void Start(std::shared_ptr<http::Exchange> exchange, Lease lease, GenerationRequest request,
                    Format format);

  GenerationCall(std::shared_ptr<http::Exchange> exchange, Lease lease, Format format);

 private:
  void Drain();
  void Finish(const Completion& completion);
  void Cancel();

  std::shared_ptr<http::Exchange> exchange_;
  std::optional<Lease> lease_;
  Format format_;
  std::shared_ptr<TokenStream> stream_;
  std::string text_;  // collected output (non-streamed responses)
  bool ended_ = false;
};

}  // namespace llmux::api
