// Kernel timeline of any CUDA program, graph nodes included (libkernel-trace.so, loaded by the CUDA driver through
// CUDA_INJECTION64_PATH): CUPTI's concurrent-kernel activity records, which time each kernel on the GPU without
// serializing launches, so programmatic launches show as they overlap. The GPU machine has Nsight Compute but not
// Nsight Systems; this is the part of the latter that scripts/gpu-decode-timeline.sh needs.
// Output: KERNEL_TRACE_OUT (default /tmp/kernel-trace.csv), one line a kernel: start and duration in ns, the demangled
// name; the format of `nsys stats --report cuda_gpu_trace --format csv` as far as scripts/timeline-layers.py reads it.
// Copies are lines too, named "[memcpy HtoD 4096 B]" (as nsys names them, so the step scripts skip them): what sits
// between two steps' kernels (scripts/timeline-gaps.py).
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

FILE* g_out = nullptr;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = size_t(16) << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

std::string demangled(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : name;
  std::free(d);
  for (char& c : s)
    if (c == '"') c = '\'';
  return s;
}

const char* copy_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    default: return "other";
  }
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (!g_out) continue;
    if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      std::fprintf(g_out, "%llu,%llu,\"[memcpy %s %llu B]\"\n", static_cast<unsigned long long>(m->start),
                   static_cast<unsigned long long>(m->end - m->start), copy_kind(m->copyKind),
                   static_cast<unsigned long long>(m->bytes));
      continue;
    }
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    std::fprintf(g_out, "%llu,%llu,\"%s\"\n", static_cast<unsigned long long>(k->start),
                 static_cast<unsigned long long>(k->end - k->start), demangled(k->name).c_str());
  }
  std::free(buffer);
}

void finish() {
  cuptiActivityFlushAll(1);
  if (g_out) std::fclose(g_out), g_out = nullptr;
}

}  // namespace

extern "C" int InitializeInjection() {
  const char* path = std::getenv("KERNEL_TRACE_OUT");
  g_out = std::fopen(path && *path ? path : "/tmp/kernel-trace.csv", "w");
  if (!g_out) return 0;
  std::fprintf(g_out, "Start (ns),Duration (ns),Name\n");
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel-trace: CUPTI activity tracing unavailable\n");
    return 0;
  }
  std::atexit(finish);
  return 1;
}
