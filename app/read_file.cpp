// Whole input files read for the subcommands, and the flags' lower bounds (see cli.h).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/cli.h"

namespace app {

std::string read_input_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UsageError("cannot read " + what + " file '" + path + "': a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read " + what + " file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw UsageError("cannot read " + what + " file '" + path + "': a read error");
  return text.str();
}

CLI::Validator at_least(double least, bool above) {
  std::ostringstream bound;
  bound << least;
  const std::string says = (above ? "must be above " : "must be at least ") + bound.str();
  return CLI::Validator(
      [least, above, says](std::string& value) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(value, v)) return "expected a number, got '" + value + "'";
        return (above ? v > least : v >= least) ? std::string() : says + ", got " + value;
      },
      (above ? "> " : ">= ") + bound.str());
}

}  // namespace app
