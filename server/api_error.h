// The one error type of the HTTP layer: what goes wrong with a request, as OpenAI's error body describes it
// ({"error": {"message", "type", "param", "code"}}) with the HTTP status to answer. Parsers and handlers throw it;
// the server turns it into the response.
#pragma once
#include <stdexcept>
#include <string>

namespace server {

class ApiError : public std::runtime_error {
 public:
  // param and code: "" becomes null in the body.
  ApiError(int status, std::string type, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const noexcept { return status_; }
  const std::string& type() const noexcept { return type_; }    // invalid_request_error, authentication_error, ...
  const std::string& param() const noexcept { return param_; }  // the request field at fault
  const std::string& code() const noexcept { return code_; }    // context_length_exceeded, invalid_api_key, ...

 private:
  int status_;
  std::string type_;
  std::string param_;
  std::string code_;
};

// 400 invalid_request_error about one field.
inline ApiError invalid_field(const std::string& param, const std::string& message,
                              const std::string& code = "invalid_value") {
  return ApiError(400, "invalid_request_error", message, param, code);
}

// The JSON body of an error: {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}.
std::string error_body(const ApiError& e);

}  // namespace server
