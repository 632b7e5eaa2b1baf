#include "app/version.h"

#include <string>

#include "git_commit.h"  // generated at build time (cmake/git_commit.cmake)

#ifdef LLM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace app {

std::string version_string() {
  std::string s = "llm-run " LLM_VERSION " (commit " LLM_GIT_COMMIT ")";
#ifdef LLM_HAVE_CUDA
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  auto fmt = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
  s += "\nCUDA runtime " + fmt(runtime) + ", driver " + (driver ? fmt(driver) : std::string("not found"));
#else
  s += "\nbuilt without CUDA (CPU reference only)";
#endif
  return s;
}

}  // namespace app
