// Whole input files read for the subcommands (see cli.h).
#include <fstream>
#include <sstream>

#include "app/cli.h"

namespace app {

std::string read_input_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read " + what + " file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace app
