// ApiError: a request the server refuses, with the HTTP status and OpenAI's error fields
// ({"error": {"message", "type", "param", "code"}}), thrown where the fault is found.
#pragma once

#include <fmt/format.h>

#include <string>

#include "core/error.h"

namespace lumen::server {

class ApiError : public Error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string code = {})
      : Error(message), status_(status), param_(std::move(param)), code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  // OpenAI's error type for the status: invalid_request_error, authentication_error, ...
  std::string type() const;

 private:
  int status_;
  std::string param_;
  std::string code_;
};

// A 400 naming the request field at fault.
template <class... Args>
[[noreturn]] void bad_request(const std::string& param, fmt::format_string<Args...> format, Args&&... args) {
  throw ApiError(400, fmt::format(format, std::forward<Args>(args)...), param);
}

// The JSON body of an error response.
std::string error_body(int status, const std::string& message, const std::string& param = {}, const std::string& code = {});
inline std::string error_body(const ApiError& e) { return error_body(e.status(), e.what(), e.param(), e.code()); }

}  // namespace lumen::server
