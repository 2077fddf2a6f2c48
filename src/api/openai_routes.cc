#include "api/openai_routes.h"

#include <chrono>

#include "api/generation_call.h"
#include "api/openai_request.h"
#include "api/openai_response.h"
#include "api/pool_errors.h"
#include "api/prompt_tokens.h"
#include "engine/engine.h"
#include "pool/engine_pool.h"

namespace llmux::api {

void SendError(http::Exchange& exchange, const ApiError& error) {
  http::Headers extra;
  if (error.status == 503) extra.emplace_back("Retry-After", "1");
  exchange.Reply(error.status, "application/json", error.Body(), std::move(extra));
}

namespace {

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

ApiError ContextExceeded(size_t n_prompt, int32_t n_ctx) {
  ApiError e;
  e.status = 400;
  e.type = "exceed_context_size_error";
  e.code = "context_length_exceeded";
  e.param = "messages";
  e.message = "request (" + std::to_string(n_prompt) + " tokens) exceeds the available context size (" +
              std::to_string(n_ctx) + " tokens), try increasing it";
  e.extra["n_prompt_tokens"] = n_prompt;
  e.extra["n_ctx"] = n_ctx;
  return e;
}

GenerationRequest ToGeneration(const TextGenerationParams& p, Tokens prompt) {
  GenerationRequest g;
  g.prompt = std::move(prompt);
  g.sampling = p.sampling;
  g.max_tokens = p.max_tokens;
  g.stop = p.stop;
  g.ignore_eos = p.ignore_eos;
  return g;
}

// Checks the prompt fits, then hands the request to a GenerationCall.
void Generate(const std::shared_ptr<http::Exchange>& ex, Lease lease, const TextGenerationParams& params,
              Tokens prompt, CompletionKind kind, const char* prompt_param) {
  const int32_t n_ctx = lease.engine().context_per_sequence();
  if (prompt.empty()) return SendError(*ex, InvalidField(prompt_param, "the prompt is empty"));
  if (static_cast<int64_t>(prompt.size()) >= n_ctx) {
    ApiError e = ContextExceeded(prompt.size(), n_ctx);
    e.param = prompt_param;
    return SendError(*ex, e);
  }
  GenerationCall::Format format;
  format.identity.kind = kind;
  format.identity.id = NewResponseId(kind);
  format.identity.model = lease.model().id;
  format.identity.created = UnixNow();
  format.stream = params.stream;
  format.include_usage = params.stream && params.include_usage;
  GenerationCall::Start(ex, std::move(lease), ToGeneration(params, std::move(prompt)), std::move(format));
}

// Acquires a lease without blocking the worker thread on a model load; the
// rest of the handler runs on a worker once the model is there.
template <typename Request, typename Continue>
void WithLease(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex, Request request, Continue next) {
  auto req = std::make_shared<Request>(std::move(request));
  const std::string model = req->params.model;
  ctx.pool->AcquireAsync(model, [ex, req, next](Acquired a) {
    auto acquired = std::make_shared<Acquired>(std::move(a));
    ex->PostWork([ex, req, next, acquired] {
      if (!acquired->ok()) return SendError(*ex, AcquireError(*acquired));
      if (ex->client_gone()) return;  // left while the model loaded; the lease ends here
      next(ex, *req, std::move(*acquired->lease));
    });
  });
}

void ContinueChat(const std::shared_ptr<http::Exchange>& ex, const ChatRequest& req, Lease lease) {
  Tokens tokens;
  if (auto e = ChatPromptTokens(lease.engine(), req, &tokens)) return SendError(*ex, *e);
  Generate(ex, std::move(lease), req.params, std::move(tokens), CompletionKind::kChat, "messages");
}

void ContinueCompletion(const std::shared_ptr<http::Exchange>& ex, const CompletionRequest& req, Lease lease) {
  Tokens tokens;
  if (auto e = CompletionPromptTokens(lease.engine(), req, &tokens)) return SendError(*ex, *e);
  Generate(ex, std::move(lease), req.params, std::move(tokens), CompletionKind::kText, "prompt");
}

void ChatCompletions(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  Json body;
  if (auto e = ParseJsonObject(ex->request().body, &body)) return SendError(*ex, *e);
  ChatRequest req;
  if (auto e = ParseChatRequest(body, &req)) return SendError(*ex, *e);
  WithLease(ctx, ex, std::move(req), ContinueChat);
}

void Completions(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  Json body;
  if (auto e = ParseJsonObject(ex->request().body, &body)) return SendError(*ex, *e);
  CompletionRequest req;
  if (auto e = ParseCompletionRequest(body, &req)) return SendError(*ex, *e);
  WithLease(ctx, ex, std::move(req), ContinueCompletion);
}

void ListModels(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  Json data = Json::array();
  for (const ModelStatus& m : ctx.pool->Status().models) {
    Json j = Json::object();
    j["id"] = m.id;
    j["object"] = "model";
    j["created"] = 0;
    j["owned_by"] = "llmux";
    j["status"] = ModelStateName(m.state);
    if (!m.alias.empty()) j["alias"] = m.alias;
    data.push_back(std::move(j));
  }
  Json body = Json::object();
  body["object"] = "list";
  body["data"] = std::move(data);
  ex->Reply(200, "application/json", Dump(body));
}

}  // namespace

void AddOpenAiRoutes(http::Router& router, ApiContext& ctx) {
  router.Add("POST", "/v1/chat/completions", http::Dispatch::kWorker,
             [&ctx](std::shared_ptr<http::Exchange> ex) { ChatCompletions(ctx, ex); });
  router.Add("POST", "/v1/completions", http::Dispatch::kWorker,
             [&ctx](std::shared_ptr<http::Exchange> ex) { Completions(ctx, ex); });
  router.Add("GET", "/v1/models", http::Dispatch::kInline,
             [&ctx](std::shared_ptr<http::Exchange> ex) { ListModels(ctx, ex); });
}

}  // namespace llmux::api
