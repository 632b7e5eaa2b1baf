// What the int16 decode matvec (matvec_i16.cu) can take, shared by its launcher and the predicate that tells the
// executor so (matvec_fuses, matvec_i16_fits.cpp).
#pragma once
#include <cstdint>

namespace cuda {

// Units of 32 weights one thread a slice serves in one pass: K <= 16384 (a 1024-thread block caps registers at 64).
inline constexpr int kI16MaxUnits = 512;

// Rows of more units (K / 32 > kI16MaxUnits) take passes over K with x's runs in shared memory: whether those of the
// fewest passes fit a block's shared memory on the current device.
bool matvec_i16_wide_runs_fit(int64_t units);

}  // namespace cuda
