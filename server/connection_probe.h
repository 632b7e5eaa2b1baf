// Whether the client of a request that is being handled has hung up, for responses that write nothing until the
// end (a non-streaming completion): its request should stop generating at once, not run to max_tokens for nobody.
//
// Debian's cpp-httplib 0.11.4 tells a handler nothing about its connection: Request has no is_connection_closed()
// (later versions added one) and no socket, and the connection's Stream is not passed to handlers. But a handler runs
// on the thread that owns the connection, whose socket stays open until the handler returns; so the socket can be
// found once among the process's descriptors by its two endpoints (Request's local and remote address and port, which
// name one open TCP connection), and then polled without reading from it.
#pragma once
#include <httplib.h>

namespace server {

class ConnectionProbe {
 public:
  explicit ConnectionProbe(const httplib::Request& req);

  bool found() const { return fd_ >= 0; }
  // True once the peer has closed or reset the connection (never when the socket was not found). A client that only
  // shuts down its sending side counts as gone too: HTTP clients do not, while they wait for an answer.
  bool closed() const;

 private:
  int fd_ = -1;  // not owned: httplib closes it after the handler
};

}  // namespace server
