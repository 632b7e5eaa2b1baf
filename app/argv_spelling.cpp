// See argv_spelling.h.
#include "app/argv_spelling.h"

namespace app {

std::vector<std::string> respell_bench_pg(std::vector<std::string> args) {
  bool in_bench = false;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (!in_bench) {
      in_bench = a == "bench";
      continue;
    }
    if (a == "--") break;  // what follows is not an option
    if (a == "-pg" || a.rfind("-pg=", 0) == 0) a = "-" + a;
  }
  return args;
}

}  // namespace app
