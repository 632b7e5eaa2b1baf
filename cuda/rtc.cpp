// NVRTC compilation and the verified on-disk cubin cache (cuda/rtc.h).
// Entry format: "LLMRTC01" | u64 payload bytes | u64 FNV-1a of the payload | u64 key | payload (the cubin).
#include "cuda/rtc.h"

#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <system_error>

namespace cuda {

namespace {

constexpr char kMagic[8] = {'L', 'L', 'M', 'R', 'T', 'C', '0', '1'};
struct Header {
  char magic[8];
  uint64_t bytes;
  uint64_t checksum;
  uint64_t key;
};

uint64_t key_of(const ::std::string& source, int arch) {
  int major = 0, minor = 0;
  NVRTC_CHECK(nvrtcVersion(&major, &minor));
  const ::std::string salt = "sm_" + ::std::to_string(arch) + "|nvrtc " + ::std::to_string(major) + "." +
                             ::std::to_string(minor) + "|";
  return fnv1a64(source.data(), source.size(), fnv1a64(salt.data(), salt.size()));
}

// The entry's cubin when the file exists and verifies; empty otherwise (`bad` says whether a file was there).
::std::vector<char> read_entry(const ::std::filesystem::path& p, uint64_t key, bool& bad) {
  bad = false;
  ::std::ifstream in(p, ::std::ios::binary);
  if (!in) return {};
  Header h{};
  ::std::vector<char> payload;
  in.read(reinterpret_cast<char*>(&h), sizeof h);
  bad = true;
  if (!in || ::std::memcmp(h.magic, kMagic, 8) != 0 || h.key != key || h.bytes == 0 || h.bytes > (1ull << 30))
    return {};
  payload.resize(size_t(h.bytes));
  in.read(payload.data(), ::std::streamsize(h.bytes));
  if (!in || in.peek() != ::std::ifstream::traits_type::eof()) return {};
  if (fnv1a64(payload.data(), payload.size()) != h.checksum) return {};
  bad = false;
  return payload;
}

// Written to a temporary name and renamed, so a concurrent reader never sees half an entry.
void write_entry(const ::std::filesystem::path& p, uint64_t key, const ::std::vector<char>& cubin) {
  ::std::error_code ec;
  ::std::filesystem::create_directories(p.parent_path(), ec);
  const auto tmp = p.string() + ".tmp" + ::std::to_string(::std::rand());
  {
    ::std::ofstream out(tmp, ::std::ios::binary | ::std::ios::trunc);
    if (!out) return;  // read-only cache: compile every time
    Header h{};
    ::std::memcpy(h.magic, kMagic, 8);
    h.bytes = cubin.size(), h.checksum = fnv1a64(cubin.data(), cubin.size()), h.key = key;
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    out.write(cubin.data(), ::std::streamsize(cubin.size()));
    if (!out) {
      ::std::filesystem::remove(tmp, ec);
      return;
    }
  }
  ::std::filesystem::rename(tmp, p, ec);
  if (ec) ::std::filesystem::remove(tmp, ec);
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// ---- RtcModule ----

RtcModule::RtcModule(const ::std::vector<char>& cubin) {
  CUDA_CHECK(cudaLibraryLoadData(&lib_, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
}
RtcModule::RtcModule(RtcModule&& o) noexcept : lib_(o.lib_) { o.lib_ = nullptr; }
RtcModule& RtcModule::operator=(RtcModule&& o) noexcept {
  if (this != &o) {
    if (lib_) (void)cudaLibraryUnload(lib_);
    lib_ = o.lib_, o.lib_ = nullptr;
  }
  return *this;
}
RtcModule::~RtcModule() {
  if (lib_) (void)cudaLibraryUnload(lib_);
}
cudaKernel_t RtcModule::kernel(const char* name) const {
  cudaKernel_t k = nullptr;
  CUDA_CHECK(cudaLibraryGetKernel(&k, lib_, name));
  return k;
}

// ---- RtcCache ----

RtcCache::RtcCache(::std::filesystem::path dir) : dir_(dir.empty() ? default_dir() : ::std::move(dir)) {}

::std::filesystem::path RtcCache::default_dir() {
  if (const char* x = ::std::getenv("XDG_CACHE_HOME"); x && *x) return ::std::filesystem::path(x) / "llm-run";
  if (const char* h = ::std::getenv("HOME"); h && *h) return ::std::filesystem::path(h) / ".cache" / "llm-run";
  return ::std::filesystem::temp_directory_path() / "llm-run-cache";
}

::std::filesystem::path RtcCache::entry_path(const ::std::string& name, const ::std::string& source, int arch) const {
  char hex[17];
  ::std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key_of(source, arch)));
  return dir_ / (name + "-sm" + ::std::to_string(arch) + "-" + hex + ".cubin");
}

::std::vector<char> RtcCache::compile(const ::std::string& name, const ::std::string& source, int arch) {
  nvrtcProgram prog = nullptr;
  NVRTC_CHECK(nvrtcCreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr));
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { (void)nvrtcDestroyProgram(p); }
  } destroy{&prog};
  const ::std::string gpu = "--gpu-architecture=sm_" + ::std::to_string(arch);
  // No fast-math: the fused kernels must compute exactly what the ahead-of-time ones compute.
  const char* opts[] = {gpu.c_str(), "--std=c++17", "--fmad=true"};
  const nvrtcResult r = nvrtcCompileProgram(prog, 3, opts);
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    (void)nvrtcGetProgramLogSize(prog, &n);
    ::std::string log(n, '\0');
    (void)nvrtcGetProgramLog(prog, log.data());
    throw Error("NVRTC could not compile '" + name + "' for sm_" + ::std::to_string(arch) + ": " +
                nvrtcGetErrorString(r) + "\n" + log);
  }
  size_t bytes = 0;
  NVRTC_CHECK(nvrtcGetCUBINSize(prog, &bytes));
  ::std::vector<char> cubin(bytes);
  NVRTC_CHECK(nvrtcGetCUBIN(prog, cubin.data()));
  return cubin;
}

::std::vector<char> RtcCache::cubin(const ::std::string& name, const ::std::string& source, int arch) {
  const uint64_t key = key_of(source, arch);
  const auto path = entry_path(name, source, arch);
  bool bad = false;
  auto c = read_entry(path, key, bad);
  if (!c.empty()) {
    ++stats_.loaded;
    return c;
  }
  if (bad) ++stats_.rejected;
  c = compile(name, source, arch);
  ++stats_.compiled;
  write_entry(path, key, c);
  return c;
}

}  // namespace cuda
