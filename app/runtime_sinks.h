// How the command line shows what the runtime reports (runtime/events.h): log lines on stderr with the
// "llm-run:" prefix, and progress as a bar on stderr when it is a terminal.
#pragma once
#include "runtime/events.h"

namespace app {

// "llm-run: note: ...", "llm-run: warning: ...", and -v details as "llm-run: ...".
runtime::LogSink stderr_log();

// One progress bar (app/progress.h) per operation, finished when it reports done == total.
runtime::ProgressSink progress_bars();

}  // namespace app
