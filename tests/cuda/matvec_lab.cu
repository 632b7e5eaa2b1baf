// Kernel lab for the decode matvec (docs/kernel-notes.md): times the int16 kernel (Auto) against the float unit
// kernel and the generic chunk kernel for the preset formats on the big shapes of an 8B model and on the wide down
// projections (K > 16384) of Phi-4, Gemma 3 27B, Llama 3 70B and Mistral Small, in HBM (weights rotated over copies
// > 3x L2).
// Each sample times a batch of back-to-back launches with CUDA events (as in a captured decode graph); median of 30.
// Usage: matvec-lab   (prints one line per type x shape x path, then the summary table)
//        MATVEC_LAB_SHAPES="2048x12288,6144x2048" MATVEC_LAB_TYPES="Q4_K,MXFP4" matvec-lab   (K x N; other shapes and
//        types: the mixtures' experts as one dense matrix of the same bytes, for instance)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/kernels/matvec.cuh"
#include "lab_common.cuh"
#include "quant/types.h"

namespace {

struct Row {
  const char* type;
  long long K, N;
  double mib, us[3];  // generic chunk kernel, float unit kernel, Auto (the int16 kernel for these formats)
};

}  // namespace

int main() {
  cudaDeviceProp prop{};
  const cudaStream_t s = lab::open_device(prop);
  const double copy_gbs = lab::copy_gbs(s);
  std::printf("copy D2D 1 GiB: %.0f GB/s (read + write)\n", copy_gbs);
  std::vector<std::pair<long long, long long>> shapes = {{4096, 4096},  {4096, 1024},  {4096, 14336},
                                                        {14336, 4096}, {4096, 128256}, {17920, 5120},
                                                        {21504, 5376}, {28672, 8192}, {32768, 5120}};
  using quant::Type;
  std::vector<Type> types = {Type::Q4_K, Type::Q6_K, Type::Q4_0, Type::Q8_0};
  if (const char* e = std::getenv("MATVEC_LAB_SHAPES")) {
    shapes.clear();
    std::stringstream ss(e);
    for (std::string item; std::getline(ss, item, ',');) {
      long long K = 0, N = 0;
      if (std::sscanf(item.c_str(), "%lldx%lld", &K, &N) != 2 || K <= 0 || N <= 0) {
        std::fprintf(stderr, "MATVEC_LAB_SHAPES: '%s' is not KxN\n", item.c_str());
        return 2;
      }
      shapes.emplace_back(K, N);
    }
  }
  if (const char* e = std::getenv("MATVEC_LAB_TYPES")) {
    types.clear();
    std::stringstream ss(e);
    for (std::string item; std::getline(ss, item, ',');) {
      const Type* t = std::find_if(std::begin(quant::kAllTypes), std::end(quant::kAllTypes),
                                   [&](Type c) { return item == quant::type_name(c); });
      if (t == std::end(quant::kAllTypes)) {
        std::fprintf(stderr, "MATVEC_LAB_TYPES: unknown type '%s'\n", item.c_str());
        return 2;
      }
      types.push_back(*t);
    }
  }
  float* x;
  float* y;
  LAB_CHECK(cudaMalloc(&x, 32768 * 4));
  LAB_CHECK(cudaMalloc(&y, 128256 * 4));
  {
    std::vector<float> hx(32768);
    std::mt19937 rng(1);
    for (auto& v : hx) v = float(rng() % 2001) / 1000.0f - 1.0f;
    LAB_CHECK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  }
  std::vector<Row> rows;
  for (Type t : types)
    for (const auto& sh : shapes) {
      const long long K = sh.first, N = sh.second;
      if (K % quant::traits(t).block_elems != 0) continue;  // rows of whole blocks only (2880 is no K-quant width)
      const size_t wb = quant::row_bytes(t, K) * N;
      const int copies = int(std::max<size_t>(3, (size_t(200) << 20) / wb + 1));  // > 200 MB in rotation
      std::vector<void*> w(copies);
      for (int i = 0; i < copies; ++i) {
        LAB_CHECK(cudaMalloc(&w[i], wb));
        lab::fill_kernel<<<1024, 256, 0, s>>>(static_cast<uint8_t*>(w[i]), wb, 77u + i);
      }
      LAB_CHECK(cudaStreamSynchronize(s));
      Row row{quant::type_name(t), K, N, wb / 1048576.0, {}};
      for (int g = 0; g < 3; ++g) {
        const auto path = g == 0 ? cuda::MatvecPath::Generic : g == 1 ? cuda::MatvecPath::Unit : cuda::MatvecPath::Auto;
        row.us[g] = lab::median_us(30, copies, s, [&](int i) {
          cuda::MatvecParams p{w[i % copies], t, x, nullptr, y, K, N, 1};
          p.path = path;
          cuda::launch_matvec(p, s);
        });
      }
      LAB_CHECK(cudaGetLastError());
      rows.push_back(row);
      for (void* p : w) LAB_CHECK(cudaFree(p));
    }
  std::printf("\nmatvec T=1, x f32, median of 30 batches; %% of copy bandwidth %.0f GB/s\n", copy_gbs);
  std::printf("%-5s %6s %7s %8s", "type", "K", "N", "MiB");
  for (const char* name : {"generic", "unit f32", "auto i16"}) std::printf(" | %9s %7s %5s", name, "GB/s", "%");
  std::printf("\n");
  for (const auto& r : rows) {
    const double b = r.mib * 1048576.0;
    std::printf("%-5s %6lld %7lld %8.1f", r.type, r.K, r.N, r.mib);
    for (double us : r.us) std::printf(" | %7.1fus %7.0f %4.0f%%", us, b / us / 1e3, 100 * b / us / 1e3 / copy_gbs);
    std::printf("\n");
  }
  LAB_CHECK(cudaFree(x));
  LAB_CHECK(cudaFree(y));
  return 0;
}
