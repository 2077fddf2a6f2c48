// ApiError: an error answered to a client, in OpenAI's envelope:
//   {"error":{"message":..., "type":..., "param":..., "code":...}}
// plus any extra fields (e.g. n_prompt_tokens and n_ctx for context errors).
#pragma once

#include <string>
#include <string_view>

#include "api/json.h"

namespace llmux::api {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // "" is sent as null
  std::string code;   // "" is sent as null
  Json extra = Json::object();

  Json ToJson() const;
  std::string Body() const { return Dump(ToJson()); }
};

// 400 invalid_request_error naming the offending field.
ApiError InvalidField(std::string param, std::string message, std::string code = "invalid_value");
// The error type conventionally paired with an HTTP status (404 -> not_found_error, ...).
std::string ErrorTypeForStatus(int status);
// An envelope for errors the HTTP layer answers itself (404 route, 413, ...).
std::string HttpErrorBody(int status, std::string_view code, std::string_view message);

}  // namespace llmux::api
