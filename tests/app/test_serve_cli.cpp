// `llm-run serve` as a process: it prints its address when ready, answers, and on SIGTERM or SIGINT stops and exits
// 0. The port is the OS's pick (--port 0), read from the ready line; every wait has a deadline.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "../server/http_client.h"
#include "assets.h"
#include "process.h"

namespace {

constexpr int kTimeoutMs = 60'000;

struct ServeProcess {
  pid_t pid = -1;
  int out = -1;  // the child's stdout

  explicit ServeProcess(const std::string& model) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid = fork();
    if (pid == 0) {
      dup2(fds[1], STDOUT_FILENO);
      const int devnull = open("/dev/null", O_RDWR);
      dup2(devnull, STDIN_FILENO);
      dup2(devnull, STDERR_FILENO);
      close(fds[0]);
      execl(LLM_BINARY_DIR "/app/llm-run", "llm-run", "serve", "-m", model.c_str(), "--device", "cpu", "-t", "1",
            "--port", "0", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    out = fds[0];
  }
  ~ServeProcess() {
    if (pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (out >= 0) close(out);
  }

  // The first line of stdout, or "" after the deadline.
  std::string ready_line() {
    std::string line;
    while (line.find('\n') == std::string::npos) {
      pollfd p{out, POLLIN, 0};
      if (poll(&p, 1, kTimeoutMs) <= 0) return "";
      char buf[256];
      const ssize_t n = read(out, buf, sizeof buf);
      if (n <= 0) return "";
      line.append(buf, static_cast<size_t>(n));
    }
    return line;
  }

  // The exit status after sig, or -1 when it did not exit before the deadline.
  int stop_with(int sig) {
    kill(pid, sig);
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) return -1;
    pollfd p{pidfd, POLLIN, 0};
    const int ready = poll(&p, 1, kTimeoutMs);
    close(pidfd);
    if (ready <= 0) return -1;
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

TEST(ServeCli, HelpDescribesBatching) {
  const testing_process::Result r = testing_process::run_llm_run("serve --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--parallel"), std::string::npos);
  EXPECT_NE(r.out.find("--batch-tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--api-key"), std::string::npos);
}

// Flag values that cannot be right are usage errors before the model loads.
TEST(ServeCli, BadOriginsAndReasoningFormatsAreUsageErrors) {
  REQUIRE_ASSET(model, "models/stories260K-f32.gguf");
  const std::string m = "serve -m " + testing_process::shell_quote(model) + " --device cpu --port 0 ";
  for (const char* bad : {"--allow-origin ftp://x.org", "--allow-origin https://x.org/path", "--allow-origin x.org",
                          "--reasoning-format xml"}) {
    const testing_process::Result r = testing_process::run_llm_run(m + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find(std::string(bad).substr(0, std::string(bad).find(' '))), std::string::npos) << r.err;
  }
}

TEST(ServeCli, ServesThenStopsOnSigtermAndSigint) {
  REQUIRE_ASSET(model, "models/stories260K-f32.gguf");
  for (int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(sig == SIGTERM ? "SIGTERM" : "SIGINT");
    ServeProcess p(model);
    ASSERT_GT(p.pid, 0);
    const std::string line = p.ready_line();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, std::regex("http://127\\.0\\.0\\.1:([0-9]+)"))) << line;
    const int port = std::stoi(m[1]);
    EXPECT_EQ(test_http::request(port, "GET", "/health").status, 200);
    const auto r = test_http::request(port, "POST", "/v1/completions", R"({"prompt": "Once", "max_tokens": 4})");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(p.stop_with(sig), 0);
  }
}

}  // namespace
