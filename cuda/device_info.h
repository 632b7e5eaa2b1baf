// Device facts the benchmark reports beside tokens/s: the measured copy bandwidth (the ceiling of decode speed)
// and device memory in use; free memory, which sessions check before allocating; the multiprocessors and a kernel's
// occupancy, which launchers size their grids by.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace cuda {

// Device-to-device copy bandwidth in GB/s (1e9 bytes/s), counting bytes read plus bytes written, from the median
// of timed 1 GiB cudaMemcpyAsync calls after a warm-up. Allocates and frees its own buffers.
double measure_copy_bandwidth_gbs();

// Bytes of device memory in use on the current device (total - free, all processes).
uint64_t device_memory_used();

// Bytes of device memory free on the current device (cudaMemGetInfo), what a new allocation can still get.
uint64_t device_memory_free();

std::string device_name();

// Multiprocessors of the current device, queried once per device (launchers size their grids by it).
int current_device_sm_count();

// Blocks of `kernel` one multiprocessor holds at once with `threads` threads and `smem` bytes of dynamic shared
// memory (0: such a block does not fit), asked of the driver once per triple (cudaOccupancyMaxActiveBlocks...).
int kernel_blocks_per_sm(const void* kernel, int threads, size_t smem);

// The opt-in limit of dynamic shared memory per block on the current device (0 when it cannot be asked: no device),
// asked once per device.
size_t current_device_smem_optin();

// Opts `kernel` in to all the dynamic shared memory the current device allows a block (the opt-in limit less the
// kernel's static shared memory) and returns that amount. Call once per kernel, before any graph capture.
size_t kernel_opt_in_smem(const void* kernel);

}  // namespace cuda
