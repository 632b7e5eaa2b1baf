// What the int16 decode matvec (matvec_i16.cu) can take, shared by its launcher and the predicate that tells the
// executor so (matvec_fuses, matvec_i16_fits.cpp).
#pragma once
#include <cstdint>

namespace cuda {

// Units of 32 weights one thread a slice serves in one pass: K <= 16384 (a 1024-thread block caps registers at 64).
inline constexpr int kI16MaxUnits = 512;

// Row slices sharing x in a block, at most: 8 (the 1B's 2048-wide launches, 64 threads a slice) measured slower than
// 4 (tg128 1667 against 1694) and than one (1684); the 8B's 4096-wide launches have 4.
inline constexpr int kI16MaxSlices = 4;

// Threads a row slice takes for rows of K in one pass: one per 32-weight unit, in whole warps.
inline int i16_threads_per_slice(int64_t K) { return int((K / 32 + 31) / 32 * 32); }

// Rows of more units (K / 32 > kI16MaxUnits) take passes over K with x's runs in shared memory: whether those of the
// fewest passes fit a block's shared memory on the current device.
bool matvec_i16_wide_runs_fit(int64_t units);

}  // namespace cuda
