// A minimal HTTP/1.1 client over a plain socket, for the server tests: requests with "Connection: close", the
// response read to the end (chunked bodies decoded), and a connection that can read a stream piece by piece and hang
// up in the middle. Every socket operation has a timeout, so a server that hangs fails the test instead of stalling it.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace test_http {

inline constexpr int kTimeoutSeconds = 60;

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // de-chunked
};

class Connection {
 public:
  explicit Connection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket() failed");
    timeval tv{kTimeoutSeconds, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~Connection() { close(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool connected() const { return connected_; }

  void send_request(const std::string& method, const std::string& path, const std::string& body,
                    const std::vector<std::string>& headers = {}) {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    for (const auto& h : headers) req += h + "\r\n";
    if (method == "POST") req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    req += "\r\n" + body;
    size_t sent = 0;
    while (sent < req.size()) {
      const ssize_t n = ::send(fd_, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may refuse early (413); the answer is still readable
      sent += static_cast<size_t>(n);
    }
  }

  // Sends bytes as they are (a request the helper above cannot write: no Content-Length, a chunked body).
  void send_raw(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  // Reads what arrives next (appended to raw()); false at the end of the stream, an error or the timeout.
  bool read_some() {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    raw_.append(buf, static_cast<size_t>(n));
    return true;
  }
  const std::string& raw() const { return raw_; }

  // Reads to the end and parses the response.
  Response finish() {
    while (read_some()) {
    }
    return parse(raw_);
  }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  static Response parse(const std::string& raw) {
    Response r;
    const size_t head_end = raw.find("\r\n\r\n");
    if (head_end == std::string::npos) return r;
    const std::string head = raw.substr(0, head_end);
    size_t line_end = head.find("\r\n");
    const std::string status_line = head.substr(0, line_end);
    if (status_line.size() >= 12) r.status = std::stoi(status_line.substr(9, 3));
    while (line_end != std::string::npos) {
      const size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      const std::string line = head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      r.headers[name] = line.substr(v);
    }
    std::string body = raw.substr(head_end + 4);
    if (r.headers["transfer-encoding"] == "chunked") {
      std::string out;
      size_t pos = 0;
      for (;;) {
        const size_t eol = body.find("\r\n", pos);
        if (eol == std::string::npos) break;
        const size_t len = std::stoul(body.substr(pos, eol - pos), nullptr, 16);
        if (len == 0 || eol + 2 + len > body.size()) break;
        out += body.substr(eol + 2, len);
        pos = eol + 2 + len + 2;
      }
      body = out;
    }
    r.body = body;
    return r;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string raw_;
};

inline Response request(int port, const std::string& method, const std::string& path, const std::string& body = "",
                        const std::vector<std::string>& headers = {}) {
  Connection c(port);
  if (!c.connected()) return {};
  c.send_request(method, path, body, headers);
  return c.finish();
}

// The JSON payloads of a server-sent-event body, in order ("[DONE]" included as it is).
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) out.push_back(event.substr(6));
    pos = end + 2;
  }
  return out;
}

}  // namespace test_http
