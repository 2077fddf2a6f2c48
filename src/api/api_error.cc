#include "api/api_error.h"

namespace llmux::api {

Json ApiError::ToJson() const {
  Json e = Json::object();
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? Json(nullptr) : Json(param);
  e["code"] = code.empty() ? Json(nullptr) : Json(code);
  for (auto it = extra.begin(); it != extra.end(); ++it) e[it.key()] = it.value();
  Json body = Json::object();
  body["error"] = std::move(e);
  return body;
}

ApiError InvalidField(std::string param, std::string message, std::string code) {
  ApiError e;
  e.status = 400;
  e.type = "invalid_request_error";
  e.param = std::move(param);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

std::string ErrorTypeForStatus(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "unavailable_error";
    case 507: return "insufficient_memory";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string HttpErrorBody(int status, std::string_view code, std::string_view message) {
  ApiError e;
  e.status = status;
  e.type = ErrorTypeForStatus(status);
  e.code = std::string(code);
  e.message = std::string(message);
  return e.Body();
}

}  // namespace llmux::api
