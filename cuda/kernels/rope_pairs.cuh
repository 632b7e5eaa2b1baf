// The rows of q and k heads reordered at upload so that each NeoX rope pair lies side by side (graph/rope_pairs.h;
// cuda/weight_layouts.h says which weights). Same bytes per row, another row order.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace cuda {

// Reorders, in place, the rows of n_heads consecutive heads of head_dim rows of row_bytes each starting at `rows`
// (row 2i of a head takes row i, 2i + 1 row i + n_rot / 2), through `scratch` (scratch_bytes, at least one head),
// on `stream`. A bias is rows of 4 bytes.
void launch_rope_pair_rows(uint8_t* rows, int64_t n_heads, int32_t head_dim, int32_t n_rot, size_t row_bytes,
                           uint8_t* scratch, size_t scratch_bytes, cudaStream_t stream);

}  // namespace cuda
