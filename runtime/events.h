// How the runtime tells its caller what it is doing without printing: notes and warnings for the user, details
// for -v, and progress of long operations (the weight upload). The command line prints them on stderr; a server
// logs them. Runtime code never writes to stdout or stderr itself.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace runtime {

enum class LogLevel {
  Detail,   // what -v shows: the device, the memory plan, allocations, captures
  Note,     // something the user should know that changes nothing they asked for ("context capped at ...")
  Warning,  // something that may not be what the user meant ("context longer than the training context")
};

// One complete message, without a trailing newline.
using LogSink = std::function<void(LogLevel level, const std::string& message)>;

// Progress of a long operation named by `what` ("loading weights"): done of total units (bytes for uploads); called
// repeatedly with growing done, the last time with done == total.
using ProgressSink = std::function<void(std::string_view what, uint64_t done, uint64_t total)>;

// Calls sink when it is set; a runtime without a sink stays silent.
inline void log(const LogSink& sink, LogLevel level, const std::string& message) {
  if (sink) sink(level, message);
}

}  // namespace runtime
