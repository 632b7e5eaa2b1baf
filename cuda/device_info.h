// Device facts the benchmark reports beside tokens/s: the measured copy bandwidth (the ceiling of decode speed)
// and device memory in use.
#pragma once
#include <cstdint>
#include <string>

namespace cuda {

// Device-to-device copy bandwidth in GB/s (1e9 bytes/s), counting bytes read plus bytes written, from the median
// of timed 1 GiB cudaMemcpyAsync calls after a warm-up. Allocates and frees its own buffers.
double measure_copy_bandwidth_gbs();

// Bytes of device memory in use on the current device (total - free, all processes).
uint64_t device_memory_used();

std::string device_name();

}  // namespace cuda
