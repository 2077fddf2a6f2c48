#include "api/openai_request.h"

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <limits>

namespace llmux::api {
namespace {

using Error = std::optional<ApiError>;

// A field that is absent or JSON null counts as not given.
const Json* Field(const Json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// "0 and 2", "-2 and 2", "0.01 and 10": the bounds as people write them.
std::string Bounds(double lo, double hi) {
  auto fmt = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  return fmt(lo) + " and " + fmt(hi);
}

Error ReadFloat(const Json& obj, const char* name, double lo, double hi, float* out) {
  const Json* v = Field(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return InvalidField(name, std::string("'") + name + "' must be a number", "invalid_type");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    return InvalidField(name, std::string("'") + name + "' must be between " + Bounds(lo, hi) + " (got " + v->dump() + ")");
  }
  *out = static_cast<float>(d);
  return std::nullopt;
}

// Integers may arrive as JSON integers or as floats with no fraction (5.0).
Error ReadInt(const Json& obj, const char* name, int64_t lo, int64_t hi, int64_t* out) {
  const Json* v = Field(obj, name);
  if (v == nullptr) return std::nullopt;
  int64_t i = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    i = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                        : static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    i = v->get<int64_t>();
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > 9.0e18) {
      return InvalidField(name, std::string("'") + name + "' must be an integer", "invalid_type");
    }
    i = static_cast<int64_t>(d);
  } else {
    return InvalidField(name, std::string("'") + name + "' must be an integer", "invalid_type");
  }
  if (i < lo || i > hi) {
    return InvalidField(name, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " +
                                  std::to_string(hi) + " (got " + v->dump() + ")");
  }
  *out = i;
  return std::nullopt;
}

Error ReadBool(const Json& obj, const char* name, bool* out) {
  const Json* v = Field(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return InvalidField(name, std::string("'") + name + "' must be a boolean", "invalid_type");
  *out = v->get<bool>();
  return std::nullopt;
}

Error Unsupported(const char* name, const std::string& what) {
  return InvalidField(name, what + " is not supported by this server", "unsupported_parameter");
}

Error ReadStop(const Json& obj, std::vector<std::string>* out) {
  const Json* v = Field(obj, "stop");
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) {
    if (!v->get_ref<const std::string&>().empty()) out->push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > kMaxStopStrings) {
      return InvalidField("stop", "'stop' may hold at most " + std::to_string(kMaxStopStrings) + " strings");
    }
    for (const Json& s : *v) {
      if (!s.is_string()) return InvalidField("stop", "'stop' must be a string or an array of strings", "invalid_type");
      if (!s.get_ref<const std::string&>().empty()) out->push_back(s.get<std::string>());
    }
  } else {
    return InvalidField("stop", "'stop' must be a string or an array of strings", "invalid_type");
  }
  for (const std::string& s : *out) {
    if (s.size() > kMaxStopBytes) {
      return InvalidField("stop", "each stop string may be at most " + std::to_string(kMaxStopBytes) + " bytes");
    }
  }
  return std::nullopt;
}

Error ReadCommon(const Json& body, TextGenerationParams* p) {
  const Json* model = Field(body, "model");
  if (model == nullptr) return InvalidField("model", "'model' is required", "missing_required_parameter");
  if (!model->is_string()) return InvalidField("model", "'model' must be a string", "invalid_type");
  p->model = model->get<std::string>();
  if (p->model.empty()) return InvalidField("model", "'model' must not be empty");

  if (auto e = ReadBool(body, "stream", &p->stream)) return e;
  if (const Json* so = Field(body, "stream_options")) {
    if (!so->is_object()) return InvalidField("stream_options", "'stream_options' must be an object", "invalid_type");
    if (auto e = ReadBool(*so, "include_usage", &p->include_usage)) {
      e->param = "stream_options.include_usage";
      e->message = "'stream_options.include_usage' must be a boolean";
      return e;
    }
  }

  SamplingParams& s = p->sampling;
  if (auto e = ReadFloat(body, "temperature", 0.0, 2.0, &s.temperature)) return e;
  if (auto e = ReadFloat(body, "top_p", 0.0, 1.0, &s.top_p)) return e;
  if (auto e = ReadFloat(body, "min_p", 0.0, 1.0, &s.min_p)) return e;
  if (auto e = ReadFloat(body, "presence_penalty", -2.0, 2.0, &s.presence_penalty)) return e;
  if (auto e = ReadFloat(body, "frequency_penalty", -2.0, 2.0, &s.frequency_penalty)) return e;
  if (auto e = ReadFloat(body, "repeat_penalty", 0.01, 10.0, &s.repeat_penalty)) return e;
  int64_t i = 0;
  if (Field(body, "top_k") != nullptr) {
    if (auto e = ReadInt(body, "top_k", 0, 1'000'000, &i)) return e;
    s.top_k = static_cast<int32_t>(i);
  }
  if (Field(body, "repeat_last_n") != nullptr) {
    if (auto e = ReadInt(body, "repeat_last_n", 0, 1'000'000, &i)) return e;
    s.repeat_last_n = static_cast<int32_t>(i);
  }
  if (Field(body, "seed") != nullptr) {
    if (auto e = ReadInt(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &i)) {
      return e;
    }
    s.seed = i == -1 ? SamplingParams::kRandomSeed : static_cast<uint32_t>(static_cast<uint64_t>(i) & 0xFFFFFFFFu);
  }

  // max_completion_tokens is the newer name; it wins when both are given.
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (Field(body, name) == nullptr) continue;
    if (auto e = ReadInt(body, name, 1, std::numeric_limits<int32_t>::max(), &i)) return e;
    p->max_tokens = static_cast<int32_t>(i);
  }
  if (auto e = ReadStop(body, &p->stop)) return e;
  if (auto e = ReadBool(body, "ignore_eos", &p->ignore_eos)) return e;

  if (Field(body, "n") != nullptr) {
    if (auto e = ReadInt(body, "n", 1, 1, &i)) {
      e->message = "only 'n': 1 is supported (got " + body["n"].dump() + ")";
      return e;
    }
  }
  if (const Json* lb = Field(body, "logit_bias"); lb != nullptr && !(lb->is_object() && lb->empty())) {
    return Unsupported("logit_bias", "'logit_bias'");
  }
  return std::nullopt;
}

// OpenAI message content: a string, or an array of {"type":"text","text":...} parts.
Error ReadContent(const Json& msg, const std::string& where, std::string* out) {
  const Json* c = Field(msg, "content");
  if (c == nullptr) return std::nullopt;  // e.g. an assistant turn that only called tools
  if (c->is_string()) {
    *out = c->get<std::string>();
    return std::nullopt;
  }
  if (!c->is_array()) {
    return InvalidField(where + ".content", "'" + where + ".content' must be a string or an array of content parts",
                        "invalid_type");
  }
  for (size_t k = 0; k < c->size(); ++k) {
    const Json& part = (*c)[k];
    const std::string pw = where + ".content[" + std::to_string(k) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return InvalidField(pw, "'" + pw + "' must be an object with a 'type'", "invalid_type");
    }
    if (part["type"] != "text") {
      return InvalidField(pw, "content part type '" + part["type"].get<std::string>() + "' is not supported (text only)",
                          "unsupported_content");
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      return InvalidField(pw + ".text", "'" + pw + ".text' must be a string", "invalid_type");
    }
    out->append(part["text"].get<std::string>());
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseJsonObject(std::string_view body, Json* out) {
  *out = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    ApiError e = InvalidField("", "request body is not valid JSON", "invalid_json");
    return e;
  }
  if (!out->is_object()) return InvalidField("", "request body must be a JSON object", "invalid_json");
  return std::nullopt;
}

std::optional<ApiError> ParseChatRequest(const Json& body, ChatRequest* out) {
  if (auto e = ReadCommon(body, &out->params)) return e;
  const Json* messages = Field(body, "messages");
  if (messages == nullptr) return InvalidField("messages", "'messages' is required", "missing_required_parameter");
  if (!messages->is_array()) return InvalidField("messages", "'messages' must be an array", "invalid_type");
  if (messages->empty()) return InvalidField("messages", "'messages' must contain at least one message");
  for (size_t k = 0; k < messages->size(); ++k) {
    const Json& m = (*messages)[k];
    const std::string where = "messages[" + std::to_string(k) + "]";
    if (!m.is_object()) return InvalidField(where, "'" + where + "' must be an object", "invalid_type");
    const Json* role = Field(m, "role");
    if (role == nullptr || !role->is_string()) {
      return InvalidField(where + ".role", "'" + where + ".role' must be a string", "invalid_type");
    }
    runtime::ChatMessage msg;
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant") {
      return InvalidField(where + ".role",
                          "'" + where + ".role' must be one of system, developer, user, assistant (got '" +
                              role->get<std::string>() + "')");
    }
    if (auto e = ReadContent(m, where, &msg.content)) return e;
    if (Field(m, "tool_calls") != nullptr) return Unsupported("tools", "tool calling");
    out->messages.push_back(std::move(msg));
  }
  if (const Json* tools = Field(body, "tools"); tools != nullptr && !(tools->is_array() && tools->empty())) {
    return Unsupported("tools", "tool calling ('tools')");
  }
  if (const Json* rf = Field(body, "response_format")) {
    if (!rf->is_object() || !rf->contains("type") || (*rf)["type"] != "text") {
      return Unsupported("response_format", "a 'response_format' other than {\"type\":\"text\"}");
    }
  }
  if (const Json* lp = Field(body, "logprobs"); lp != nullptr && !(lp->is_boolean() && !lp->get<bool>())) {
    return Unsupported("logprobs", "'logprobs'");
  }
  return std::nullopt;
}

std::optional<ApiError> ParseCompletionRequest(const Json& body, CompletionRequest* out) {
  if (auto e = ReadCommon(body, &out->params)) return e;
  const Json* prompt = Field(body, "prompt");
  if (prompt == nullptr) return InvalidField("prompt", "'prompt' is required", "missing_required_parameter");
  auto is_token_array = [](const Json& a) {
    if (!a.is_array() || a.empty()) return false;
    for (const Json& t : a) {
      if (!t.is_number_integer()) return false;
    }
    return true;
  };
  const Json* single = prompt;
  if (prompt->is_array() && !prompt->empty() && !is_token_array(*prompt)) {
    // A batch of prompts: only a batch of one is supported.
    if (prompt->size() != 1) return InvalidField("prompt", "only one prompt per request is supported");
    single = &(*prompt)[0];
  }
  if (single->is_string()) {
    out->prompt_text = single->get<std::string>();
  } else if (is_token_array(*single)) {
    out->prompt_is_tokens = true;
    for (const Json& t : *single) {
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
        return InvalidField("prompt", "token id " + t.dump() + " is out of range");
      }
      out->prompt_tokens.push_back(static_cast<Token>(id));
    }
  } else {
    return InvalidField("prompt", "'prompt' must be a string or an array of token ids", "invalid_type");
  }
  if (const Json* echo = Field(body, "echo"); echo != nullptr && !(echo->is_boolean() && !echo->get<bool>())) {
    return Unsupported("echo", "'echo'");
  }
  if (Field(body, "suffix") != nullptr) return Unsupported("suffix", "'suffix'");
  if (Field(body, "logprobs") != nullptr) return Unsupported("logprobs", "'logprobs'");
  if (const Json* bo = Field(body, "best_of"); bo != nullptr && !(bo->is_number_integer() && bo->get<int64_t>() == 1)) {
    return Unsupported("best_of", "'best_of' other than 1");
  }
  return std::nullopt;
}

}  // namespace llmux::api
