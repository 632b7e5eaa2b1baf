// Running llm-run as a process from tests: exit code, stdout and stderr captured through temporary files, optional
// stdin text, and $LLM_RUN_MODEL unset so the user's environment cannot change what a test sees.
#pragma once
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace testing_process {

struct Result {
  int code = -1;    // exit status, -1 when killed by a signal
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// args are appended to the binary's path as they are: quote what needs quoting with shell_quote.
inline Result run_llm_run(const std::string& args, const std::optional<std::string>& stdin_text = std::nullopt) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "llm_run_test_XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return {};
  const std::filesystem::path dir = tmpl;
  std::string cmd = "env -u LLM_RUN_MODEL " + shell_quote(LLM_BINARY_DIR "/app/llm-run") + " " + args;
  if (stdin_text) {
    std::ofstream(dir / "in", std::ios::binary) << *stdin_text;
    cmd += " <" + shell_quote((dir / "in").string());
  } else {
    cmd += " </dev/null";
  }
  cmd += " >" + shell_quote((dir / "out").string()) + " 2>" + shell_quote((dir / "err").string());
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace testing_process
