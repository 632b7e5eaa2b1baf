// The one exception the chat-template interpreter throws: what went wrong, which kind of failure it is, and where
// in the template text (line and column) it happened. Callers never see a crash or a bare std:: exception.
#pragma once
#include <stdexcept>
#include <string>

namespace chat {

class TemplateError : public std::runtime_error {
 public:
  enum class Kind {
    Syntax,  // the template text does not parse, or names a filter or test that does not exist
    Render,  // a type error, an undefined value used as a real one, a bad argument while rendering
    Raised,  // the template called raise_exception(msg); message() is msg verbatim
    Limit,   // an output, iteration, size or nesting limit stopped a runaway or hostile template
  };

  // line and column are 1-based (column counts characters, not bytes); 0 means "not known yet": the interpreter
  // fills in the position of the innermost template construct that was being evaluated.
  TemplateError(Kind kind, std::string message, int line = 0, int column = 0);

  Kind kind() const noexcept { return kind_; }
  const std::string& message() const noexcept { return message_; }  // without the position prefix
  int line() const noexcept { return line_; }
  int column() const noexcept { return column_; }

 private:
  Kind kind_;
  std::string message_;
  int line_;
  int column_;
};

}  // namespace chat
