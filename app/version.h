// Version, git commit and (when built with CUDA) runtime and driver versions, for --version and bench output.
#pragma once
#include <string>

namespace app {
std::string version_string();
}
